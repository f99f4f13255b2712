import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';

describe('limits and policy from .nas/', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('gives EDQUOT for a write past the branch quota, and keeps what fit', async () => {
    const limits = (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).replace(/branch_quota_bytes: \d+/, 'branch_quota_bytes: 65536');
    await d.pushToMain({ '.nas/limits.yaml': limits });
    expect((await d.nas('branch', 'create', 'demo/small')).code).toBe(0);
    const p = (rel: string) => d.path('demo@small', rel);
    await fs.writeFile(p('outbox/fits.bin'), Buffer.alloc(40_000, 1));
    expect(await codeOf(fs.writeFile(p('outbox/too-big.bin'), Buffer.alloc(40_000, 2)))).toBe('EDQUOT');
    // A streaming writer meets the quota mid-file, as dd shows it. (workspace/ is the disk itself, served
    // without the daemon: its bytes count in nas branch list, not at the syscall.)
    const dd = await run('dd', ['if=/dev/zero', `of=${p('outbox/stream.bin')}`, 'bs=64k', 'count=4']);
    expect(dd.stderr).toMatch(/Disk quota exceeded/);
    // Freeing space makes room again; what fit is intact and committed.
    await fs.unlink(p('outbox/too-big.bin'));
    await fs.unlink(p('outbox/stream.bin'));
    await fs.writeFile(p('outbox/small.md'), 'ok\n');
    await d.sync('demo/small');
    expect((await d.gitBlob('small:outbox/fits.bin')).equals(Buffer.alloc(40_000, 1))).toBe(true);
    expect((await d.gitBlob('small:outbox/small.md')).toString()).toBe('ok\n');
  });

  it('holds all branches of a Home to home_quota_bytes together, and refuses a branch past max_branches', async () => {
    // The first test's branch holds some bytes already: the Home's quota leaves 110,000 beside them.
    const small = (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'small').quota.used as number;
    const limits = (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8'))
      .replace(/home_quota_bytes: \d+/, `home_quota_bytes: ${small + 110_000}`).replace(/max_branches: \d+/, 'max_branches: 3');
    await d.pushToMain({ '.nas/limits.yaml': limits });
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).includes('max_branches: 3'), 'main to show the limits');
    expect((await d.nas('branch', 'create', 'demo/pool-a')).code).toBe(0);
    expect((await d.nas('branch', 'create', 'demo/pool-b')).code).toBe(0);
    // pool-a fits under its own quota (65,536) and the Home's; pool-b would fit its own, not the Home's.
    await fs.writeFile(d.path('demo@pool-a', 'outbox/a.bin'), Buffer.alloc(60_000, 1));
    expect(await codeOf(fs.writeFile(d.path('demo@pool-b', 'outbox/b.bin'), Buffer.alloc(60_000, 2)))).toBe('EDQUOT');
    await fs.writeFile(d.path('demo@pool-b', 'outbox/b.bin'), Buffer.alloc(20_000, 2));
    // Discarding a branch gives its bytes back to the Home.
    expect((await d.nas('branch', 'discard', 'demo/pool-a')).code).toBe(0);
    await fs.writeFile(d.path('demo@pool-b', 'outbox/c.bin'), Buffer.alloc(40_000, 3));
    // small, pool-b, and one more make three: a fourth is refused, clearly, and nothing is made.
    expect((await d.nas('branch', 'create', 'demo/third')).code).toBe(0);
    const fourth = await d.nas('branch', 'create', 'demo/fourth');
    expect(fourth.code).toBe(1);
    expect(fourth.stderr).toMatch(/has 3 branches, the most its \.nas\/limits\.yaml allows \(max_branches: 3\)/);
    expect((await d.git('show-ref')).stdout).not.toMatch(/fourth/);
    for (const b of ['pool-b', 'third']) expect((await d.nas('branch', 'discard', `demo/${b}`)).code).toBe(0);
    await d.pushToMain({ '.nas/limits.yaml': limits.replace(/home_quota_bytes: \d+/, 'home_quota_bytes: 21474836480').replace(/max_branches: \d+/, 'max_branches: 100') });
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).includes('max_branches: 100'), 'main to show the limits');
  });

  it('applies the strictest defaults when policy.yaml is malformed, reports it, and keeps serving', async () => {
    await d.pushToMain({ '.nas/policy.yaml': 'version: 1\nread_only: [".nas/**"\nappend_only: {\n' });
    await eventually(async () => {
      const homes = await d.nasJson<any[]>('home', 'list');
      return homes[0].problems.some((p: string) => /policy\.yaml: malformed YAML at line \d+/.test(p));
    }, 'problem reported');
    const list = await d.nas('home', 'list');
    expect(list.stdout).toMatch(/warning: demo: .nas\/policy.yaml: malformed YAML at line/);
    expect((await d.nas('branch', 'create', 'demo/strict')).code).toBe(0);
    const p = (rel: string) => d.path('demo@strict', rel);
    await fs.writeFile(p('outbox/ok.md'), 'ok\n');
    expect(await codeOf(fs.writeFile(p('.nas/policy.yaml'), 'x'))).toBe('EPERM');
    await fs.appendFile(p('memory/journal/j.md'), 'a\n');
    expect(await codeOf(fs.writeFile(p('memory/journal/j.md'), 'b\n'))).toBe('EPERM');
    expect(d.log).toMatch(/policy\.yaml: malformed YAML/);
  });

  it('adds read-only and append-only paths from a valid policy.yaml, without dropping the built-in ones', async () => {
    await d.pushToMain({ '.nas/policy.yaml': 'version: 1\nread_only:\n  - "skills/**"\nappend_only:\n  - "outbox/ledger.md"\n' });
    await eventually(async () => (await d.nasJson<any[]>('home', 'list'))[0].problems.length === 0, 'policy accepted');
    expect((await d.nas('branch', 'create', 'demo/custom')).code).toBe(0);
    const p = (rel: string) => d.path('demo@custom', rel);
    expect(await codeOf(fs.writeFile(p('skills/x.md'), 'x'))).toBe('EPERM');
    expect(await codeOf(fs.writeFile(p('.nas/role.yaml'), 'x'))).toBe('EPERM');
    await fs.appendFile(p('outbox/ledger.md'), 'one\n');
    expect(await codeOf(fs.writeFile(p('outbox/ledger.md'), 'two\n'))).toBe('EPERM');
    expect(await codeOf(fs.unlink(p('memory/journal/README.md')))).toBe('EPERM');
  });

  it('fails closed: a malformed policy.yaml keeps the last valid one in force, and says so', async () => {
    await d.pushToMain({ '.nas/policy.yaml': 'version: 1\nread_only: ["skills/**"\n' });
    const problems = await eventually(async () => {
      const found = (await d.nasJson<any[]>('home', 'list'))[0].problems as string[];
      return found.some((x) => /policy\.yaml: malformed YAML/.test(x)) && found;
    }, 'problem reported');
    expect(problems.join('\n')).toMatch(/policy\.yaml: the last valid version \(commit [0-9a-f]{12}\) stays in force/);
    expect((await d.nas('branch', 'create', 'demo/closed')).code).toBe(0);
    const p = (rel: string) => d.path('demo@closed', rel);
    // The operator's stricter rules from the last valid policy still hold, not the looser defaults.
    expect(await codeOf(fs.writeFile(p('skills/x.md'), 'x'))).toBe('EPERM');
    await fs.appendFile(p('outbox/ledger.md'), 'three\n');
    expect(await codeOf(fs.writeFile(p('outbox/ledger.md'), 'four\n'))).toBe('EPERM');
  });

  it('changes .nas/ the supported way: checked, proposed on its own branch, merged only when the owner approves', async () => {
    const bad = await run(process.execPath, [path.resolve(import.meta.dirname, '../../dist/src/cli/main.js'), '--socket', d.socket,
      'home', 'config', 'demo', '.nas/policy.yaml'], { env: { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token` }, input: 'version: 1\nread_only: ["x"\n' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/would not read whole; nothing was proposed/);
    const policy = 'version: 1\nread_only:\n  - "outbox/frozen.md"\n';
    await fs.writeFile(`${d.dir}/policy.yaml`, policy);
    const pr = await d.nasJson('home', 'config', 'demo', '.nas/policy.yaml', '--from', `${d.dir}/policy.yaml`, '--intent', 'freeze outbox/frozen');
    expect(pr.state).toBe('waiting');
    expect(pr.reasons.join(' ')).toMatch(/changes Home metadata: \.nas\/policy\.yaml/);
    expect((await d.gitBlob('main:.nas/policy.yaml')).toString()).not.toBe(policy);
    expect((await d.nasJson('pr', 'approve', 'demo', String(pr.id))).state).toBe('merged');
    expect((await d.gitBlob('main:.nas/policy.yaml')).toString()).toBe(policy);
    expect((await d.nas('branch', 'create', 'demo/frozen')).code).toBe(0);
    expect(await codeOf(fs.writeFile(d.path('demo@frozen', 'outbox/frozen.md'), 'x'))).toBe('EPERM');
  });
});

/**
 * Files held open through the mount are capped per user and per branch (nasd.yaml): one user holding thousands
 * of files used to leave nasd no descriptors, and then everyone got EIO and nas sync failed.
 */
/** Processes holding files open for a test; each is stopped by its pid, also on failure. */
const holders: ChildProcess[] = [];

/**
 * As `uid`, open `file` again and again (its own RLIMIT_NOFILE raised to the hard one) until an open fails;
 * say how many it got and why, then hold them all until its stdin closes.
 */
const hold = async (uid: number, file: string): Promise<{ opened: number; code: string; child: ChildProcess }> => {
  const script = 'import errno, os, resource, sys\n' +
    'hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\nresource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n' +
    'fds = []\ntry:\n  while True: fds.append(os.open(sys.argv[1], os.O_RDONLY))\n' +
    'except OSError as e:\n  print(len(fds), errno.errorcode[e.errno], flush=True)\nsys.stdin.read()\n';
  const child = spawn('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '/usr/bin/python3', '-c', script, file], { stdio: ['pipe', 'pipe', 'pipe'] });
  holders.push(child);
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (c) => (out += c) && out.includes('\n') && resolve(out.trim()));
    child.stderr!.on('data', (c) => (err += c));
    child.once('exit', (code) => reject(new Error(`the holder exited (${code}) before it said anything: ${err}`)));
  });
  const [opened, code] = line.split(' ');
  return { opened: Number(opened), code, child };
};
const release = async (child: ChildProcess) => {
  const gone = new Promise((r) => child.once('exit', r));
  child.stdin!.end();
  await gone;
};
const stopHolders = () => {
  for (const child of holders.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
};

describe('open files', () => {
  let d: TestDaemon;
  let config: string;
  const p = (rel: string) => d.path('demo@many', rel);

  beforeAll(async () => {
    config = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-open-files-'));
    await fs.writeFile(`${config}/nasd.yaml`, 'open_files_per_user: 300\nopen_files_per_branch: 500\n');
    d = await TestDaemon.withBranch('many', { extraArgs: ['--config', `${config}/nasd.yaml`] });
    expect((await d.nas('branch', 'create', 'demo/other')).code).toBe(0);
    // Both users work in the branch (write leases): each may hold open_files_per_user there.
    for (const principal of ['nobody', 'daemon']) expect((await d.nas('lease', 'issue', 'demo/many', '--principal', principal, '--ttl', '1h')).code).toBe(0);
    await fs.writeFile(p('outbox/shared.md'), 'read me\n');
    await d.sync('demo/many');
  });
  afterAll(async () => {
    stopHolders();
    await d?.cleanup();
    if (config) await fs.rm(config, { recursive: true, force: true });
  });

  it('gives EMFILE to a user past open_files_per_user, says so in the log, and others and nas sync still work', async () => {
    const nobody = await hold(65534, p('outbox/shared.md'));
    expect([nobody.opened, nobody.code]).toEqual([300, 'EMFILE']);
    await eventually(async () => /"uid":65534.*"setting":"open_files_per_user".*too many files open through the mount/.test(d.log), 'the per-user cap in the log');
    // Another user reads in the same branch, root writes there, and the write commits.
    const daemon = await run('setpriv', ['--reuid=1', '--regid=1', '--clear-groups', 'cat', p('outbox/shared.md')]);
    expect(daemon.stdout).toBe('read me\n');
    await fs.writeFile(p('outbox/after.md'), 'written while nobody holds 300 files\n');
    await d.sync('demo/many');
    expect((await d.gitBlob('many:outbox/after.md')).toString()).toBe('written while nobody holds 300 files\n');
    await release(nobody.child);
    // Its files closed, the user opens again.
    await eventually(async () => (await run('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'cat', p('outbox/shared.md')])).code === 0, 'nobody to open again');
  });

  it('gives EMFILE past open_files_per_branch, whoever opens; other branches and nas sync still work', async () => {
    const nobody = await hold(65534, p('outbox/shared.md'));
    expect([nobody.opened, nobody.code]).toEqual([300, 'EMFILE']);
    // The branch holds 300 of its 500: a second user gets the rest, then EMFILE, and so does root.
    const daemon = await hold(1, p('outbox/shared.md'));
    expect([daemon.opened, daemon.code]).toEqual([200, 'EMFILE']);
    // The log line is written as the cap is hit; it reaches the test through nasd's stdout a moment later.
    await eventually(async () => /"view":"demo@many".*"setting":"open_files_per_branch"/.test(d.log), 'the per-branch cap in the log');
    expect(await codeOf(fs.readFile(p('outbox/shared.md')))).toBe('EMFILE');
    // Elsewhere files open as always; what the full branch has pending still commits.
    await fs.writeFile(d.path('demo@other', 'outbox/elsewhere.md'), 'elsewhere\n');
    expect(await fs.readFile(d.path('demo', 'AGENTS.md'), 'utf8')).toMatch(/\S/);
    await d.sync('demo/other');
    expect((await d.gitBlob('other:outbox/elsewhere.md')).toString()).toBe('elsewhere\n');
    expect((await d.nas('sync', 'demo/many')).code).toBe(0);
    await release(daemon.child);
    await release(nobody.child);
    await eventually(async () => (await codeOf(fs.readFile(p('outbox/shared.md')))) === 'OK', 'the branch to open files again');
  });
});

describe('open files of readers without a lease', () => {
  let d: TestDaemon;
  let config: string;
  const TOTAL = 200;

  beforeAll(async () => {
    // The total for files open through the mount is (RLIMIT_NOFILE - open_files_reserve) / 2: made 200 here.
    const limits = await fs.readFile('/proc/self/limits', 'utf8');
    const hard = Number(/^Max open files\s+\S+\s+(\d+)/m.exec(limits)?.[1]);
    expect(hard).toBeGreaterThan(2 * TOTAL + 1000);
    config = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-open-readers-'));
    await fs.writeFile(`${config}/nasd.yaml`, `open_files_per_user: 300\nopen_files_per_branch: 5000\nopen_files_reserve: ${hard - 2 * TOTAL}\n`);
    d = await TestDaemon.withBranch('busy', { extraArgs: ['--config', `${config}/nasd.yaml`] });
    expect((await d.nas('lease', 'issue', 'demo/busy', '--principal', 'daemon', '--ttl', '1h')).code).toBe(0);
    await fs.writeFile(d.path('demo@busy', 'outbox/read.md'), 'read me\n');
    await d.sync('demo/busy');
  });
  afterAll(async () => {
    stopHolders();
    await d?.cleanup();
    if (config) await fs.rm(config, { recursive: true, force: true });
  });

  it('caps each reader at a quarter of open_files_per_user and all of them at three quarters of the total, so root and lease holders still open', async () => {
    const file = d.path('demo@busy', 'outbox/read.md');
    // Readers (no lease on the branch): 75 files each, until together they hold 150 of the 200.
    const first = await hold(2, file);
    expect([first.opened, first.code]).toEqual([75, 'EMFILE']);
    const second = await hold(3, file);
    expect([second.opened, second.code]).toEqual([75, 'EMFILE']);
    const third = await hold(65534, file);
    expect([third.opened, third.code]).toEqual([0, 'ENFILE']);
    await eventually(async () => /"reader":true.*too many files open through the mount/.test(d.log), 'the readers\' cap in the log');
    // What is left is the owner's and the lease holders': root writes and commits, the lease holder opens.
    await fs.writeFile(d.path('demo@busy', 'outbox/root.md'), 'root still opens\n');
    expect(await fs.readFile(d.path('demo', 'AGENTS.md'), 'utf8')).toMatch(/\S/);
    // The rest of the total, less root's files if the kernel has not released them yet.
    const leased = await hold(1, file);
    expect(leased.code).toBe('ENFILE');
    expect(leased.opened).toBeGreaterThan(40);
    expect(leased.opened).toBeLessThanOrEqual(50);
    await release(leased.child);
    await d.sync('demo/busy');
    expect((await d.gitBlob('busy:outbox/root.md')).toString()).toBe('root still opens\n');
    for (const h of [first, second, third]) await release(h.child);
  });
});
