import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, run } from '../helpers.js';

/** What `ls -a`, `ls -lt` and `df` see in a branch view, checked with the real tools. */
describe('listing, times and space', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@meta', rel);
  const sync = async () => {
    const r = await d.nas('sync', 'demo/meta');
    expect(r.code, r.stderr).toBe(0);
  };
  const df = async (dir: string) => {
    const r = await run('df', ['-B1', '--output=size,used,avail', dir]);
    expect(r.code, r.stderr).toBe(0);
    const [size, used, avail] = r.stdout.trim().split('\n')[1].trim().split(/\s+/).map(Number);
    return { size, used, avail };
  };

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    const r = await d.nas('branch', 'create', 'demo/meta');
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('lists . and .. in every directory, as a disk does', async () => {
    for (const dir of [d.mnt, d.path('demo'), p(''), p('outbox'), p('memory/notes')]) {
      const r = await run('ls', ['-a1', dir]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.split('\n').slice(0, 2)).toEqual(['.', '..']);
    }
  });

  it('keeps the time of a file the branch did not change when other files are committed', async () => {
    const before = (await fs.stat(p('AGENTS.md'))).mtimeMs;
    await new Promise((r) => setTimeout(r, 1100));
    await fs.writeFile(p('outbox/new.md'), 'new\n');
    await sync();
    // The kernel may cache the old attributes for a second; wait that out before asking again.
    await new Promise((r) => setTimeout(r, 1100));
    expect((await fs.stat(p('AGENTS.md'))).mtimeMs).toBe(before);
    expect((await fs.stat(p('outbox/new.md'))).mtimeMs).toBeGreaterThan(before);
  });

  it('shows the branch quota in df, and the space a write uses', async () => {
    const disk = await df(d.state);
    const first = await df(p(''));
    // The default quota is 2 GiB: df shows that (or the disk, if the disk is smaller).
    expect(first.size).toBe(Math.min(2 * 1024 ** 3, disk.size));
    await fs.writeFile(p('outbox/mib.bin'), Buffer.alloc(1 << 20, 7));
    const second = await df(p(''));
    expect(second.used - first.used).toBeGreaterThanOrEqual(1 << 20);
    expect(second.avail).toBeLessThan(first.avail);
  });
});
