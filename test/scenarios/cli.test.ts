import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TestDaemon, run, unmountIfMounted } from '../helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const nasd = (...args: string[]) => run(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, ...args]);
const nasCli = (...args: string[]) => run(process.execPath, [`${ROOT}/dist/src/cli/main.js`, ...args]);

describe('nas CLI and bad input', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('has --help for itself and each command, and usage errors exit 2', async () => {
    const help = await nasCli('--help');
    expect(help.code).toBe(0);
    for (const cmd of ['home create', 'branch create', 'trash list', 'trash restore', 'sync']) expect(help.stdout).toContain(cmd);
    expect((await nasCli('trash', '--help')).stdout).toMatch(/--to/);
    expect((await nasCli()).code).toBe(2);
    const unknown = await nasCli('frobnicate');
    expect([unknown.code, unknown.stderr]).toEqual([2, expect.stringMatching(/unknown command/)]);
    expect((await nasCli('branch', 'create', 'demo/x', '--ttl')).stderr).toMatch(/--ttl needs a value/);
    expect((await nasd('--help')).stdout).toMatch(/--state-dir/);
  });

  it('says clearly when the daemon is not running', async () => {
    const r = await nasCli('--socket', `${d.dir}/nobody.sock`, 'status');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/nasd is not running.*systemctl start nasd/);
  });

  it('nas lease issue says what it granted on stdout at a terminal, and the token alone into a pipe', async () => {
    expect((await d.nas('branch', 'create', 'demo/leased')).code).toBe(0);
    const piped = await d.nas('lease', 'issue', 'demo/leased', '--principal', 'nobody');
    expect(piped.stdout).toMatch(/^nas1\.l-[0-9a-f]{12}\.[A-Za-z0-9_-]{43}\n$/);
    expect(piped.stderr).toMatch(/^lease l-[0-9a-f]{12} for nobody on demo\/leased: propose:main, write, until /);
    // A terminal (script(1) gives the command one): both lines on stdout, nothing on stderr.
    const cmd = [process.execPath, `${ROOT}/dist/src/cli/main.js`, '--socket', d.socket, 'lease', 'issue', 'demo/leased', '--principal', 'nobody']
      .map((a) => `'${a}'`).join(' ');
    const tty = await run('script', ['-qec', `${cmd} 2>${d.dir}/tty-stderr`, '/dev/null'], { env: { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token` } });
    expect(tty.code, tty.stdout).toBe(0);
    expect(tty.stdout.replace(/\r/g, '')).toMatch(/^lease l-[0-9a-f]{12} for nobody on demo\/leased: propose:main, write, until \S+\nnas1\.l-[0-9a-f]{12}\.[A-Za-z0-9_-]{43}\n$/);
    expect(await fs.readFile(`${d.dir}/tty-stderr`, 'utf8')).toBe('');
    // The tests after this one see the Home as it was.
    expect((await d.nas('branch', 'discard', 'demo/leased')).code).toBe(0);
  });

  it('prints JSON with --json', async () => {
    const homes = await d.nasJson<any[]>('home', 'list');
    expect(homes).toEqual([expect.objectContaining({ role: 'demo', branches: [], problems: [] })]);
    const created = await d.nasJson('home', 'create', 'writer');
    expect(created).toMatchObject({ role: 'writer' });
    expect((await fs.readdir(d.mnt)).sort()).toEqual(['demo', 'writer']);
    const br = await d.nasJson('branch', 'create', 'writer/try-1', '--ttl', '2h', '--run', 'run-42');
    expect(br).toMatchObject({ name: 'try-1', from: 'main', ttl: '2h', run: 'run-42', view: 'writer@try-1' });
    const branches = await d.nasJson<any[]>('branch', 'list', 'writer');
    expect(branches).toEqual([expect.objectContaining({ name: 'try-1', ttl: '2h' })]);
    // the run id is recorded in commits
    await fs.writeFile(d.path('writer@try-1', 'outbox/r.md'), 'r\n');
    await d.sync('writer/try-1');
    const log = await run('git', [`--git-dir=${d.state}/homes/writer.git`, 'log', '-1', '--format=%B', 'try-1']);
    expect(log.stdout).toContain('Nas-Run: run-42');
    // and in what the run deletes
    await fs.unlink(d.path('writer@try-1', 'outbox/r.md'));
    await d.sync('writer/try-1');
    expect(await d.nasJson('trash', 'list', 'writer')).toEqual([expect.objectContaining({ path: 'outbox/r.md', run: 'run-42', branch: 'try-1' })]);
  });

  it('rejects hostile names with a message, and keeps serving', async () => {
    // The Home and branch the --json test makes (on its own, this test makes them).
    if (!(await d.nasJson<any[]>('home', 'list')).some((h) => h.role === 'writer')) {
      expect((await d.nas('home', 'create', 'writer')).code).toBe(0);
      expect((await d.nas('branch', 'create', 'writer/try-1')).code).toBe(0);
    }
    const bad: [string[], RegExp][] = [
      [['home', 'create', '../evil'], /invalid role name/],
      [['home', 'create', 'Demo'], /invalid role name/],
      [['home', 'create', 'a'.repeat(64)], /invalid role name/],
      [['home', 'create', 'demo'], /already exists/],
      [['home', 'create', 'x', '--template', 'fancy'], /unknown template/],
      [['branch', 'create', 'demo/..'], /invalid branch name/],
      [['branch', 'create', 'demo/a/b'], /invalid branch name/],
      [['branch', 'create', 'demo/bad\u0001name'], /invalid branch name/],
      [['branch', 'create', `demo/${'b'.repeat(101)}`], /invalid branch name/],
      [['branch', 'create', 'demo/main'], /protected/],
      [['branch', 'create', 'demo/x', '--ttl', 'forever'], /invalid duration/],
      [['branch', 'create', 'demo/x', '--from', 'nope'], /no such branch/],
      [['branch', 'create', 'nobody/x'], /no Home named "nobody"/],
      [['trash', 'restore', 'demo', '../../etc/passwd'], /'\.\.' component/],
      [['trash', 'restore', 'demo', 'a\nb'], /control character/],
      [['sync', 'demo/ghost'], /has no branch "ghost"/],
    ];
    for (const [args, message] of bad) {
      const r = await d.nas(...args);
      expect([args.join(' '), r.code, r.stderr]).toEqual([args.join(' '), 1, expect.stringMatching(message)]);
    }
    expect((await d.nas('branch', 'create', 'demo/x')).code).toBe(0);
    expect((await d.nas('branch', 'create', 'demo/x')).stderr).toMatch(/already exists/);
    expect((await d.nas('status')).code).toBe(0);
    expect((await fs.readdir(d.mnt)).sort()).toEqual(['demo', 'demo@x', 'writer', 'writer@try-1']);
  });

  it('refuses a busy or non-empty mount point, and a malformed config, with what to do', async () => {
    const busy = await nasd('--state-dir', `${d.dir}/state2`, '--mount', d.mnt, '--socket', `${d.dir}/s2.sock`);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/mount point .* is busy.*fusermount -u/);
    const full = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-full-'));
    try {
      await fs.writeFile(`${full}/keep.txt`, 'mine');
      const nonEmpty = await nasd('--state-dir', `${d.dir}/state3`, '--mount', full, '--socket', `${d.dir}/s3.sock`);
      expect(nonEmpty.stderr).toMatch(/is not empty/);
      expect(await fs.readFile(`${full}/keep.txt`, 'utf8')).toBe('mine');
    } finally {
      // Removed even when an expectation above fails; never while something is mounted on it.
      await unmountIfMounted(full);
      await fs.rm(full, { recursive: true, force: true });
    }
    await fs.writeFile(`${d.dir}/bad.yaml`, 'mount: /x\n  state_dir: [\n');
    const badConfig = await nasd('--config', `${d.dir}/bad.yaml`);
    expect(badConfig.code).toBe(1);
    expect(badConfig.stderr).toMatch(/cannot read .*bad\.yaml \(line \d+\)/);
    await fs.writeFile(`${d.dir}/typo.yaml`, 'mountpoint: /x\n');
    expect((await nasd('--config', `${d.dir}/typo.yaml`)).stderr).toMatch(/unknown setting "mountpoint"/);
  });

  it('names the package to install when /dev/fuse or libfuse is missing', async () => {
    const args = ['--state-dir', `${d.dir}/state4`, '--mount', `${d.dir}/mnt4`, '--socket', `${d.dir}/s4.sock`];
    const node = process.execPath;
    const daemon = `${ROOT}/dist/src/daemon/main.js`;
    // Private mount namespaces hide the device or the library from nasd alone.
    const noDevice = await run('unshare', ['--mount', 'sh', '-c', `mount -t tmpfs none /dev && exec ${node} ${daemon} ${args.join(' ')}`]);
    expect(noDevice.stderr).toMatch(/\/dev\/fuse is missing.*modprobe fuse/);
    const lib = (await run('sh', ['-c', 'ldconfig -p | grep -o "/.*libfuse3.so.3$" | head -1'])).stdout.trim();
    expect(lib).not.toBe('');
    const noLib = await run('unshare', ['--mount', 'sh', '-c', `mount --bind /dev/null ${lib} && exec ${node} ${daemon} ${args.join(' ')}`]);
    expect(noLib.stderr).toMatch(/libfuse 3 is missing.*apt-get install libfuse3-3/);
  });
});
