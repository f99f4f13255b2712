import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, run } from '../helpers.js';

/**
 * FIFOs, unix sockets and device nodes never reach a commit. That they work in scratch as on a disk (a FIFO
 * between two processes, a socket served to a client, a device node) and that a versioned folder refuses
 * them with EPERM are cases of test/posix, on every kind of place.
 */
describe('special files', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@sp', rel);

  beforeAll(async () => {
    d = await TestDaemon.withBranch('sp');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('keeps special files out of every commit', async () => {
    // What tools leave in scratch: a FIFO, and the socket a server bound.
    await fs.mkdir(p('workspace/run'));
    const made = await run('mkfifo', [p('workspace/run/pipe')]);
    expect(made.code, made.stderr).toBe(0);
    const bound = await run('python3', ['-c', `import os, socket; os.chdir(${JSON.stringify(p('workspace'))}); socket.socket(socket.AF_UNIX).bind("agent.sock")`]);
    expect(bound.code, bound.stderr).toBe(0);
    expect((await fs.lstat(p('workspace/agent.sock'))).isSocket()).toBe(true);
    const r = await d.nas('sync', 'demo/sp');
    expect(r.code, r.stderr).toBe(0);
    const tree = (await d.git('ls-tree', '-r', '--name-only', 'sp')).stdout;
    expect(tree).not.toMatch(/pipe|agent\.sock/);
  });

  it('never lets a special file reach a commit: a move into a versioned folder is refused, an unignored one is skipped', async () => {
    expect((await run('mkfifo', [p('outbox/.cache/pipe')])).code).toBe(1); // no such directory yet
    await fs.mkdir(p('outbox/.cache'), { recursive: true });
    // .cache/ is ignored by the template's .gitignore: scratch, where a FIFO may live.
    expect((await run('mkfifo', [p('outbox/.cache/pipe')])).code).toBe(0);
    expect(await codeOf(fs.rename(p('outbox/.cache/pipe'), p('outbox/pipe')))).toBe('EPERM');
    // Un-ignoring the folder asks for the FIFO to be committed: the commit passes it over instead of hanging.
    await fs.writeFile(p('outbox/.gitignore'), '!.cache/\n');
    const r = await d.nas('sync', 'demo/sp');
    expect(r.code, r.stderr).toBe(0);
    const tree = (await d.git('ls-tree', '-r', '--name-only', 'sp')).stdout;
    expect(tree).toContain('outbox/.gitignore');
    expect(tree).not.toContain('pipe');
  });
});
