import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, run } from '../helpers.js';

/** FIFOs, unix sockets and device nodes: in scratch they work as on a disk; git cannot hold them elsewhere. */
describe('special files', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@sp', rel);

  beforeAll(async () => {
    d = await TestDaemon.withBranch('sp');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('makes a FIFO in workspace/ that carries data between two processes', async () => {
    await fs.mkdir(p('workspace/run'));
    const fifo = p('workspace/run/pipe');
    const made = await run('mkfifo', [fifo]);
    expect(made.code, made.stderr).toBe(0);
    expect((await fs.lstat(fifo)).isFIFO()).toBe(true);
    // A reader and a writer meet in the kernel: the data never passes through nasd.
    const reader = run('cat', [fifo]);
    const writer = await run('sh', ['-c', `printf 'through the pipe' > '${fifo}'`]);
    expect(writer.code, writer.stderr).toBe(0);
    expect((await reader).stdout).toBe('through the pipe');
  });

  it('serves a unix socket in workspace/ to a client, as language servers and ssh-agent do', async () => {
    const sock = p('workspace/agent.sock');
    const script = [
      'import socket, sys, os',
      `path = ${JSON.stringify(sock)}`,
      's = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(1)',
      'c = socket.socket(socket.AF_UNIX); c.connect(path); c.sendall(b"hello over unix")',
      'conn, _ = s.accept(); sys.stdout.write(conn.recv(100).decode())',
      'sys.stdout.write(" " + str(__import__("stat").S_ISSOCK(os.lstat(path).st_mode)))',
    ].join('\n');
    const r = await run('python3', ['-c', script]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('hello over unix True');
  });

  it('lets root make a device node in workspace/, which does not open as the device: the mount is nodev', async () => {
    const r = await run('mknod', [p('workspace/null'), 'c', '1', '3']);
    expect(r.code, r.stderr).toBe(0);
    const st = await fs.lstat(p('workspace/null'));
    expect(st.isCharacterDevice()).toBe(true);
    expect(st.rdev).toBe((await fs.lstat('/dev/null')).rdev);
    expect(await codeOf(fs.writeFile(p('workspace/null'), 'swallowed'))).toBe('EACCES');
    await fs.unlink(p('workspace/null'));
  });

  it('refuses special files in versioned folders with EPERM: git cannot hold them', async () => {
    expect((await run('mkfifo', [p('outbox/pipe')])).stderr).toMatch(/Operation not permitted/);
    expect(await codeOf(fs.lstat(p('outbox/pipe')))).toBe('ENOENT');
  });

  it('keeps special files out of every commit', async () => {
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
