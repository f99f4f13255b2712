import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, isMounted, run } from '../helpers.js';

/** workspace/ is the branch's upper directory itself, bind-mounted over the view: disk speed, no daemon hop. */
describe('scratch at disk speed', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@fast', rel);
  const upper = (rel: string) => `${d.state}/homes/demo.git/nas/branches/fast/upper/${rel}`;

  beforeAll(async () => {
    d = await TestDaemon.withBranch('fast');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('serves workspace/ from the upper directory through a bind mount, not through FUSE', async () => {
    expect(await isMounted(p('workspace'))).toBe(true);
    const type = await run('stat', ['-f', '-c', '%T', p('workspace')]);
    expect(type.stdout.trim()).not.toMatch(/fuse/);
    await fs.writeFile(p('workspace/direct.txt'), 'on disk\n');
    expect(await fs.readFile(upper('workspace/direct.txt'), 'utf8')).toBe('on disk\n');
  });

  it('keeps the bind when nasd drops what the kernel keeps of the Home, and through drop_caches', async () => {
    await fs.writeFile(p('workspace/kept.txt'), 'still here\n');
    // A branch made in the Home: nasd invalidates every view of it (names only expire, so the bind stays).
    expect((await d.nas('branch', 'create', 'demo/beside')).code).toBe(0);
    await fs.writeFile('/proc/sys/vm/drop_caches', '3');
    await fs.readdir(p(''));
    expect(await isMounted(p('workspace'))).toBe(true);
    expect(await fs.readFile(p('workspace/kept.txt'), 'utf8')).toBe('still here\n');
  });

  it('gives hard links and renames across the scratch boundary EXDEV, as between two filesystems', async () => {
    await fs.writeFile(p('workspace/a.txt'), 'a\n');
    expect(await codeOf(fs.link(p('workspace/a.txt'), p('outbox/a.txt')))).toBe('EXDEV');
    expect(await codeOf(fs.rename(p('workspace/a.txt'), p('outbox/a.txt')))).toBe('EXDEV');
    // mv falls back to copy and delete, and the copy is versioned.
    expect((await run('mv', [p('workspace/a.txt'), p('outbox/a.txt')])).code).toBe(0);
    const r = await d.nas('sync', 'demo/fast');
    expect(r.code, r.stderr).toBe(0);
    expect((await d.gitBlob('fast:outbox/a.txt')).toString()).toBe('a\n');
  });

  it("hands workspace/ to the write lease's principal, so that user can work there", async () => {
    const lease = await d.nasJson<{ token: string }>('lease', 'issue', 'demo/fast', '--principal', 'nobody');
    expect(lease.token).toBeTruthy();
    const asNobody = await run('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'sh', '-c', `echo mine > '${p('workspace/nobody.txt')}'`]);
    expect(asNobody.code, asNobody.stderr).toBe(0);
    expect((await fs.stat(p('workspace/nobody.txt'))).uid).toBe(65534);
  });

  it('removes the bind with the branch when it is discarded', async () => {
    const r = await d.nas('branch', 'create', 'demo/gone');
    expect(r.code, r.stderr).toBe(0);
    expect(await isMounted(d.path('demo@gone', 'workspace'))).toBe(true);
    const discard = await d.nas('branch', 'discard', 'demo/gone');
    expect(discard.code, discard.stderr).toBe(0);
    expect(await isMounted(d.path('demo@gone', 'workspace'))).toBe(false);
  });

  it('binds again after a restart, with what scratch held', async () => {
    await d.stop();
    expect(await isMounted(p('workspace'))).toBe(false);
    d = await d.restart();
    expect(await isMounted(p('workspace'))).toBe(true);
    expect(await fs.readFile(p('workspace/kept.txt'), 'utf8')).toBe('still here\n');
  });
});
