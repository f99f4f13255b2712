import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { TestDaemon, codeOf, isMounted } from '../helpers.js';

/** A daemon killed with SIGKILL loses nothing that was closed: the next start commits it. */
describe('crash recovery', () => {
  const daemons: TestDaemon[] = [];
  let writer: ChildProcess | undefined;
  afterAll(async () => {
    // Stopped by its pid whatever happened in the test (it is killed there too, with the daemon).
    if (writer && writer.exitCode === null && writer.signalCode === null) writer.kill('SIGKILL');
    for (const d of daemons.reverse()) await d.stop();
    if (daemons[0]) await fs.rm(daemons[0].dir, { recursive: true, force: true });
  });

  it('commits closed-but-uncommitted files and pending deletions after SIGKILL and restart', async () => {
    // A batching window far longer than the test: nothing is committed before the kill.
    const d = await TestDaemon.start({ windowMs: 600_000, extraArgs: ['--demo'] });
    daemons.push(d);
    expect((await d.nas('branch', 'create', 'demo/run')).code).toBe(0);
    const p = (rel: string) => d.path('demo@run', rel);
    const files = new Map<string, Buffer>();
    for (let i = 0; i < 30; i++) {
      const data = randomBytes(1000 + i * 500);
      files.set(`outbox/f${i}.bin`, data);
      await fs.writeFile(p(`outbox/f${i}.bin`), data);
    }
    await fs.appendFile(p('memory/journal/log.md'), 'before the crash\n');
    await fs.unlink(p('inbox/README.md'));
    // A writer still busy when the daemon dies.
    writer = spawn('dd', ['if=/dev/zero', `of=${p('outbox/busy.bin')}`, 'bs=4k', 'count=1000000'], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 300));
    expect((await d.git('rev-list', '--count', 'run')).stdout.trim()).toBe('1');

    await d.kill();
    writer.kill('SIGKILL');
    expect(await isMounted(d.mnt)).toBe(true); // left stale, as after a real crash
    // statfs always asks the daemon (the kernel keeps the root's attributes, so a stat would not).
    expect(await codeOf(fs.statfs(d.mnt))).toBe('ENOTCONN');

    const again = await TestDaemon.start({ windowMs: 50, dir: d.dir });
    daemons.push(again);
    expect(again.log).toMatch(/stale FUSE mount/);
    await again.sync('demo/run');
    for (const [rel, data] of files) expect((await again.gitBlob(`run:${rel}`)).equals(data), rel).toBe(true);
    expect((await again.git('show', 'run:memory/journal/log.md')).stdout).toBe('before the crash\n');
    expect((await again.git('cat-file', '-e', 'run:inbox/README.md')).code).not.toBe(0);
    const trash = await again.nasJson<any[]>('trash', 'list', 'demo');
    expect(trash.map((t) => t.path)).toContain('inbox/README.md');
    // The view serves the same files after the restart.
    expect((await fs.readFile(again.path('demo@run', 'outbox/f7.bin'))).equals(files.get('outbox/f7.bin')!)).toBe(true);
  });
});
