import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { exec, run } from '../helpers.js';

/**
 * Our fuse-native patch (patches/fuse-native+2.2.6.patch), seen through real syscalls: a tiny fuse-native
 * filesystem runs in a child process (fixtures/fuse-native-patch-fs.cjs) and logs what its handlers got;
 * tools run against it as other users (setpriv), and what they see comes back through stat.
 */

const FIXTURE = path.resolve(import.meta.dirname, 'fixtures/fuse-native-patch-fs.cjs');
const NOBODY = 65534;
const asUser = (uid: number, cmd: string[]) => ['setpriv', '--reuid', String(uid), '--regid', String(uid), '--clear-groups', ...cmd];
const UTC = { TZ: 'UTC' };

interface Event {
  op: string;
  path?: string;
  ctx?: { uid: number; gid: number; pid: number } | null;
  late?: unknown;
  t?: number;
  atime?: unknown;
  mtime?: unknown;
  len?: number;
  value?: string;
}

/** One mounted test filesystem: a child process serving it, its event log. */
class PatchFs {
  private child!: ChildProcess;
  private out = '';
  readonly mnt: string;
  readonly logFile: string;

  private constructor(readonly dir: string) {
    this.mnt = `${dir}/mnt`;
    this.logFile = `${dir}/events.log`;
  }

  static async mount(opts: object): Promise<PatchFs> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-test-fnp-'));
    await fs.chmod(dir, 0o755); // other users reach the mount point through it
    const p = new PatchFs(dir);
    await fs.mkdir(p.mnt);
    p.child = spawn(process.execPath, [FIXTURE, p.mnt, JSON.stringify({ allowOther: true, ...opts }), p.logFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    p.child.stdout!.on('data', (d) => (p.out += d));
    p.child.stderr!.on('data', (d) => (p.out += d));
    for (let i = 0; i < 200 && !p.out.includes('mounted'); i++) {
      if (p.child.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!p.out.includes('mounted')) {
      await p.stop();
      throw new Error(`the test filesystem did not mount:\n${p.out}`);
    }
    return p;
  }

  /** Events logged so far (each is written one tick after its handler ran: wait a little for the last). */
  async events(op?: string, file?: string): Promise<Event[]> {
    await new Promise((r) => setTimeout(r, 50));
    const text = await fs.readFile(this.logFile, 'utf8').catch(() => '');
    const all = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Event);
    return all.filter((e) => (!op || e.op === op) && (!file || e.path === file));
  }

  /** Unmount (SIGTERM: the child unmounts and exits), then make sure: kill it by pid, lazy-unmount. */
  async stop(): Promise<void> {
    const pid = this.child.pid;
    if (pid !== undefined && this.child.exitCode === null) {
      const exited = new Promise((r) => this.child.once('exit', r));
      process.kill(pid, 'SIGTERM');
      const timer = setTimeout(() => {
        if (this.child.exitCode === null) process.kill(pid, 'SIGKILL');
      }, 3000);
      await exited;
      clearTimeout(timer);
    }
    const mounts = await fs.readFile('/proc/mounts', 'utf8');
    if (mounts.includes(` ${this.mnt} `)) await run('fusermount', ['-uz', this.mnt]);
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}

/** Run a command and return its pid (setpriv execs the tool: the pid FUSE sees is this one). */
function runWithPid(cmd: string[], env: NodeJS.ProcessEnv = {}): { pid: number; done: Promise<{ code: number; stderr: string }> } {
  const child = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, stderr })));
  return { pid: child.pid!, done };
}

const DATE = '2001-02-03 04:05:06.123456789';
const DATE_SEC = Date.UTC(2001, 1, 3, 4, 5, 6) / 1000;

describe('fuse-native patch: caller, times, options', () => {
  let t: PatchFs;
  beforeAll(async () => {
    t = await PatchFs.mount({ attrTimeout: 0, entryTimeout: 0, negativeTimeout: 30, useIno: true, bigWrites: true, maxWrite: 131072 });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('passes the options to libfuse, timeouts of 0 included', async () => {
    const [options] = await t.events('options');
    expect(options.value).toBe('-oallow_other,entry_timeout=0,attr_timeout=0,negative_timeout=30,big_writes,max_write=131072,use_ino');
  });

  it("gives each handler its caller's uid, gid and pid, only while the handler runs", async () => {
    const touch = runWithPid(asUser(NOBODY, ['touch', '-m', '-d', DATE, `${t.mnt}/f`]), UTC);
    expect(await touch.done).toEqual({ code: 0, stderr: '' });
    const [ev] = await t.events('utimens', '/f');
    expect(ev.ctx).toEqual({ uid: NOBODY, gid: NOBODY, pid: touch.pid });
    expect(ev.late).toBeNull(); // one tick later there is no caller to report, rather than a wrong one
  });

  it('keeps callers apart when several FUSE threads wait on the JS thread at once', async () => {
    const uids = [NOBODY, 1000, 1001, 1002, 1003];
    const cats = uids.map((uid) => runWithPid(asUser(uid, ['cat', `${t.mnt}/slow`])));
    expect(await Promise.all(cats.map((c) => c.done))).toEqual(uids.map(() => ({ code: 0, stderr: '' })));
    const events = await t.events('open', '/slow');
    expect(events.map((e) => e.ctx).sort((a, b) => a!.pid - b!.pid)).toEqual(
      uids.map((uid, i) => ({ uid, gid: uid, pid: cats[i].pid })).sort((a, b) => a.pid - b.pid),
    );
    // Each open is answered after 300 ms: all five started before the first was answered, so they were
    // in flight together, each in its own FUSE thread.
    const starts = events.map((e) => e.t!);
    expect(Math.max(...starts) - Math.min(...starts)).toBeLessThan(300);
  });

  it('touch -m delivers mtime with nanoseconds and atime as omit; stat shows the nanoseconds', async () => {
    await exec('touch', ['-m', '-d', DATE, `${t.mnt}/f`], { env: { ...process.env, ...UTC } });
    const ev = (await t.events('utimens', '/f')).at(-1)!;
    expect(ev.atime).toBe('omit');
    expect(ev.mtime).toEqual({ sec: DATE_SEC, nsec: 123456789, ms: DATE_SEC * 1000 + 123, ns: `${DATE_SEC}123456789` });
    const { stdout } = await exec('stat', ['-c', '%y|%x', `${t.mnt}/f`], { env: { ...process.env, ...UTC } });
    const [mtime, atime] = stdout.trim().split('|');
    expect(mtime).toBe('2001-02-03 04:05:06.123456789 +0000');
    expect(atime).not.toBe(mtime);
  });

  it('touch -a delivers atime only', async () => {
    await exec('touch', ['-a', '-d', '2002-03-04 05:06:07.000000042', `${t.mnt}/f`], { env: { ...process.env, ...UTC } });
    const ev = (await t.events('utimens', '/f')).at(-1)!;
    expect(ev.atime).toMatchObject({ sec: Date.UTC(2002, 2, 4, 5, 6, 7) / 1000, nsec: 42 });
    expect(ev.mtime).toBe('omit');
    const { stdout } = await exec('stat', ['-c', '%x|%y', `${t.mnt}/f`], { env: { ...process.env, ...UTC } });
    expect(stdout.trim()).toBe('2002-03-04 05:06:07.000000042 +0000|2001-02-03 04:05:06.123456789 +0000');
  });

  it('touch without a date delivers now for both (libfuse passes UTIME_NOW through)', async () => {
    await exec('touch', [`${t.mnt}/f`]);
    const ev = (await t.events('utimens', '/f')).at(-1)!;
    expect([ev.atime, ev.mtime]).toEqual(['now', 'now']);
  });

  it('stat shows the other time forms getattr may return: { sec, nsec } (before 1970 too) and Date', async () => {
    const { stdout } = await exec('stat', ['-c', '%y', `${t.mnt}/old`, `${t.mnt}/date`], { env: { ...process.env, ...UTC } });
    expect(stdout.trim().split('\n')).toEqual(['1969-12-31 23:59:59.000000005 +0000', '2020-01-02 03:04:05.678000000 +0000']);
  });

  it("a Node bigint stat result returned as it is shows as the file's own stat, nanoseconds included", async () => {
    const fmt = ['-c', '%s %a %i %x %y %z'];
    const want = (await exec('stat', [...fmt, FIXTURE])).stdout;
    expect((await exec('stat', [...fmt, `${t.mnt}/bigint`])).stdout).toBe(want);
  });

  it("use_ino: stat shows getattr's 64-bit ino", async () => {
    const { stdout } = await exec('stat', ['-c', '%i', `${t.mnt}/f`]);
    expect(stdout.trim()).toBe(String(2 ** 40 + 5));
  });

  it('big_writes with max_write: a 1 MiB write arrives in 128 KiB pieces', async () => {
    await exec('dd', ['if=/dev/zero', `of=${t.mnt}/f`, 'bs=1M', 'count=1', 'conv=notrunc']);
    const lens = (await t.events('write')).map((e) => e.len!);
    expect(lens.reduce((a, b) => a + b, 0)).toBe(1 << 20);
    expect(Math.max(...lens)).toBe(131072);
  });

  it('negative_timeout: a missing name is looked up once while the kernel remembers it', async () => {
    for (let i = 0; i < 3; i++) expect((await run('stat', [`${t.mnt}/missing-a`])).code).not.toBe(0);
    expect(await t.events('getattr', '/missing-a')).toHaveLength(1);
  });
});

describe('fuse-native patch: without the new options, libfuse defaults hold', () => {
  let t: PatchFs;
  beforeAll(async () => {
    t = await PatchFs.mount({ attrTimeout: 0, entryTimeout: 0 });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('writes come a page at a time, inode numbers are libfuse node ids, missing names are asked again', async () => {
    await exec('dd', ['if=/dev/zero', `of=${t.mnt}/f`, 'bs=64k', 'count=1', 'conv=notrunc']);
    expect(Math.max(...(await t.events('write')).map((e) => e.len!))).toBe(4096);
    expect((await exec('stat', ['-c', '%i', `${t.mnt}/f`])).stdout.trim()).not.toBe(String(2 ** 40 + 5));
    for (let i = 0; i < 2; i++) await run('stat', [`${t.mnt}/missing-b`]);
    expect(await t.events('getattr', '/missing-b')).toHaveLength(2);
  });
});

describe('fuse-native patch: Fuse.lutimens on the disk underneath', () => {
  const Fuse = createRequire(import.meta.url)('fuse-native') as {
    lutimens(p: string, atime: bigint | 'now' | 'omit', mtime: bigint | 'now' | 'omit'): void;
  };

  it("sets a symlink's own times with nanoseconds, honours omit and now, and names the errno when it fails", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-test-lutimens-'));
    try {
      await fs.writeFile(`${dir}/target`, 'x');
      await fs.symlink('target', `${dir}/link`);
      const before = await fs.stat(`${dir}/target`, { bigint: true });
      Fuse.lutimens(`${dir}/link`, 'omit', -1_234_567_890_123n); // before 1970, odd nanoseconds
      const link = await fs.lstat(`${dir}/link`, { bigint: true });
      expect(link.mtimeNs).toBe(-1_234_567_890_123n);
      expect((await fs.stat(`${dir}/target`, { bigint: true })).mtimeNs).toBe(before.mtimeNs);
      Fuse.lutimens(`${dir}/target`, 1_700_000_000_000_000_001n, 'now');
      const target = await fs.stat(`${dir}/target`, { bigint: true });
      expect(target.atimeNs).toBe(1_700_000_000_000_000_001n);
      expect(Number(target.mtimeNs / 1_000_000n)).toBeGreaterThan(Date.now() - 60_000);
      expect(() => Fuse.lutimens(`${dir}/missing`, 'now', 'now')).toThrow(expect.objectContaining({ code: 'ENOENT', errno: -2 }));
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
