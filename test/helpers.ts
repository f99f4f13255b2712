import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

export const exec = promisify(execFile);

export const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * Test daemons live in `<tmp>/<prefix>XXXXXX`. $NAS_TEST_PREFIX lets a run keep apart from another
 * checkout's suite on the same machine whose (older) sweep would unmount everything under the default.
 */
export const DIR_PREFIX = process.env.NAS_TEST_PREFIX || 'nas-test-';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run a program to completion, never throwing: tests look at the exit code. */
export async function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    if (opts.input !== undefined) {
      child.stdin!.on('error', () => undefined); // the program may exit without reading it
      child.stdin!.end(opts.input);
    }
  });
}

export interface DaemonOptions {
  windowMs?: number;
  /** Reuse the state of an earlier daemon (restart after a crash). */
  dir?: string;
  extraArgs?: string[];
  /**
   * Run nasd as its hardened systemd unit does: in a mount namespace of its own (slave of the host's),
   * without CAP_SYS_ADMIN, its fusermount being nas-mount-relay, talking to the nas-mount-broker at this socket.
   */
  sandboxBroker?: string;
  /**
   * Run nasd under a stand-in for systemd's file descriptor store (fixtures/fd-store.py): it keeps the kernel
   * connection nasd stores, and `restartKeepingConnection()` restarts nasd as `systemctl restart` would.
   */
  fdStore?: boolean;
  /** More environment for nasd (the cluster suite's crash points). */
  env?: NodeJS.ProcessEnv;
  /** How long nasd may take to be ready (15 s unless given: a cluster host matching hundreds of Homes takes longer). */
  readyMs?: number;
  /** What nasd runs under, exec'ing it (the pid stays nasd's): e.g. ['ip', 'netns', 'exec', NS] (test/cluster/netns.ts). */
  prefix?: string[];
}

/** nasd's sandbox as the unit makes it: $1 relay, $2 broker socket, then the command (one process, exec'd through). */
const SANDBOX =
  'relay="$1"; broker="$2"; shift 2; mount --bind "$relay" /usr/bin/fusermount && ' +
  'exec setpriv --bounding-set -sys_admin --inh-caps -sys_admin env NAS_MOUNT_BROKER="$broker" "$@"';

/**
 * NAS_TEST_SANITIZED=1: a plain nasd (no sandbox, no fd store) runs on the binding built with ASan and UBSan
 * (scripts/build-native.sh --sanitize; scripts/nasd-sanitized.sh starts it): a report ends nasd, and the tests fail.
 */
const SANITIZED = !!process.env.NAS_TEST_SANITIZED;
const SANITIZED_ADDON = `${ROOT}/native/build-asan/nasfuse.node`;

/** Whether process `pid` has loaded `file` (a shared object). */
function loaded(pid: number, file: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/maps`, 'utf8').includes(file);
  } catch {
    return false;
  }
}

/** A nasd in its own process, with its own temp state dir, mount point and socket. */
export class TestDaemon {
  child!: ChildProcess;
  log = '';
  readonly mnt: string;
  readonly state: string;
  readonly socket: string;

  private constructor(readonly dir: string, private readonly opts: DaemonOptions) {
    this.mnt = `${dir}/mnt`;
    this.state = `${dir}/state`;
    this.socket = `${dir}/nasd.sock`;
  }

  /**
   * A daemon serving the demo Home with one branch, ready at `<mnt>/demo@<branch>`. Its temp dir is opened
   * to every user (0755), so tests can act as other users through the mount.
   */
  static async withBranch(branch: string, opts: DaemonOptions = {}): Promise<TestDaemon> {
    const d = await TestDaemon.start({ ...opts, extraArgs: ['--demo', ...(opts.extraArgs ?? [])] });
    try {
      await fs.chmod(d.dir, 0o755);
      const r = await d.nas('branch', 'create', `demo/${branch}`);
      if (r.code !== 0) throw new Error(`nas branch create demo/${branch}: ${r.stderr}`);
    } catch (err) {
      await d.cleanup();
      throw err;
    }
    return d;
  }

  static async start(opts: DaemonOptions = {}): Promise<TestDaemon> {
    const dir = opts.dir ?? (await fs.mkdtemp(path.join(os.tmpdir(), DIR_PREFIX)));
    const d = new TestDaemon(dir, opts);
    try {
      await d.spawn();
    } catch (err) {
      // spawn() left no daemon and no mount; a dir made here goes too (the error carries the log).
      if (!opts.dir) await fs.rm(dir, { recursive: true, force: true });
      throw err;
    }
    return d;
  }

  private async spawn(): Promise<void> {
    const args = [
      `${ROOT}/dist/src/daemon/main.js`, '--state-dir', this.state, '--mount', this.mnt, '--socket', this.socket,
      '--commit-window-ms', String(this.opts.windowMs ?? 50), '--log-level', 'info', '--web-listen', '127.0.0.1:0', ...(this.opts.extraArgs ?? []),
    ];
    const nasd = SANITIZED ? [`${ROOT}/scripts/nasd-sanitized.sh`, ...args.slice(1)] : [process.execPath, ...args];
    const plain = [...(this.opts.prefix ?? []), ...nasd];
    this.child = this.opts.sandboxBroker
      ? spawn('unshare', ['--mount', '--propagation', 'slave', 'sh', '-c', SANDBOX, 'sandbox', `${ROOT}/libexec/nas-mount-relay`, this.opts.sandboxBroker, process.execPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
      : this.opts.fdStore
        ? spawn('python3', [`${ROOT}/test/fixtures/fd-store.py`, process.execPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
        : spawn(plain[0]!, plain.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], ...(this.opts.env ? { env: { ...process.env, ...this.opts.env } } : {}) });
    this.child.stdout!.on('data', (d) => (this.log += d));
    this.child.stderr!.on('data', (d) => (this.log += d));
    let onExit: (code: number | null) => void = () => undefined;
    const exited = new Promise<never>((_, reject) => {
      onExit = (code) => reject(new Error(`nasd exited with ${code} before it was ready:\n${this.log}`));
      this.child.once('exit', onExit);
    });
    let waiting = true;
    const ready = (async () => {
      const readyMs = this.opts.readyMs ?? 15_000;
      for (let i = 0; i < readyMs / 50 && waiting; i++) {
        if (this.log.includes('"nasd ready"')) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`nasd was not ready after ${readyMs / 1000} s:\n${this.log}`);
    })();
    // Marked handled: either may settle while the owner record is being written; the race below still sees it.
    exited.catch(() => undefined);
    ready.catch(() => undefined);
    try {
      // First of all: if this test process dies, the global sweep finds the daemon by this record.
      if (this.child.pid !== undefined) await writeOwner(this.dir, this.child.pid, this.mnt);
      await Promise.race([ready, exited]);
      // A sanitized run that is not on the sanitized binding would pass without checking anything.
      if (SANITIZED && !this.opts.sandboxBroker && !this.opts.fdStore && !loaded(this.child.pid!, SANITIZED_ADDON)) {
        throw new Error(`NAS_TEST_SANITIZED: nasd did not load ${SANITIZED_ADDON} (src/util/addon.ts reads NASD_ADDON)`);
      }
    } catch (err) {
      waiting = false;
      // Not ready in time, or gone: leave no daemon and no mount behind.
      await this.kill();
      await unmountIfMounted(this.mnt);
      throw err;
    } finally {
      this.child.off('exit', onExit);
    }
  }

  /** Run the nas CLI against this daemon as the owner (it reads the daemon's owner.token, as root does). */
  nas(...args: string[]): Promise<RunResult> {
    return this.nasWith({}, ...args);
  }

  /** Run the CLI with other credentials, e.g. { NAS_LEASE: token } or { owner: false } to drop the owner's. */
  nasWith(as: { NAS_LEASE?: string; owner?: boolean }, ...args: string[]): Promise<RunResult> {
    const env = {
      NAS_OWNER_TOKEN_FILE: as.owner === false ? '/nonexistent/owner.token' : `${this.state}/owner.token`,
      NAS_OWNER_TOKEN: '',
      NAS_LEASE: as.NAS_LEASE ?? '',
    };
    return run(process.execPath, [`${ROOT}/dist/src/cli/main.js`, '--socket', this.socket, ...args], { env });
  }

  /** Run the CLI and parse its --json answer, failing loudly if it did not succeed. */
  async nasJson<T = any>(...args: string[]): Promise<T> {
    const r = await this.nas('--json', ...args);
    if (r.code !== 0) throw new Error(`nas ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
    return JSON.parse(r.stdout) as T;
  }

  /** `nas sync <spec>`: commit what is pending and wait for it. Throws when it fails: tests rely on the commit. */
  async sync(spec: string): Promise<void> {
    const r = await this.nas('sync', spec);
    if (r.code !== 0) throw new Error(`nas sync ${spec} failed (${r.code}): ${r.stderr}`);
  }

  git(...args: string[]): Promise<RunResult> {
    return run('git', [`--git-dir=${this.state}/homes/demo.git`, ...args]);
  }

  /** The bytes of a blob, e.g. gitBlob('draft:outbox/x.md'). */
  async gitBlob(rev: string): Promise<Buffer> {
    const { stdout } = await exec('git', [`--git-dir=${this.state}/homes/demo.git`, 'cat-file', 'blob', rev], { encoding: 'buffer', maxBuffer: 1 << 30 });
    return stdout;
  }

  /**
   * Change main as an operator does, with plain git: clone the Store, write (or, for null, delete) files,
   * commit and push. Main is protected from views, not from its owner.
   */
  async pushToMain(files: Record<string, string | Buffer | null>, message = 'operator change'): Promise<void> {
    const work = `${this.dir}/work-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    // An operator's reviewed push: the Store's hook lets it through only with the override set.
    const git = (...args: string[]) => run('git', ['-c', 'user.name=op', '-c', 'user.email=op@x', ...args], { cwd: work, env: { NAS_OPERATOR_PUSH: '1' } });
    const clone = await run('git', ['clone', '-q', `${this.state}/homes/demo.git`, work]);
    if (clone.code !== 0) throw new Error(`git clone: ${clone.stderr}`);
    for (const [rel, content] of Object.entries(files)) {
      if (content === null) await fs.rm(`${work}/${rel}`);
      else {
        await fs.mkdir(path.dirname(`${work}/${rel}`), { recursive: true });
        await fs.writeFile(`${work}/${rel}`, content);
      }
    }
    for (const step of [['add', '-A'], ['commit', '-qm', message], ['push', '-q', 'origin', 'main']]) {
      const r = await git(...step);
      if (r.code !== 0) throw new Error(`git ${step[0]}: ${r.stderr}`);
    }
    await fs.rm(work, { recursive: true, force: true });
  }

  path(view: string, rel = ''): string {
    return rel ? `${this.mnt}/${view}/${rel}` : `${this.mnt}/${view}`;
  }

  /** SIGTERM and wait; then make sure nothing is left mounted, whatever happened. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const gone = new Promise((r) => this.child.once('exit', r));
      process.kill(this.child.pid!, 'SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([gone, new Promise((r) => (timer = setTimeout(r, 20_000)))]);
      clearTimeout(timer);
      if (this.child.exitCode === null && this.child.signalCode === null) await this.kill();
    }
    await unmountIfMounted(this.mnt);
  }

  /** Kill without warning, as a crash would: the mount is left stale. */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const gone = new Promise((r) => this.child.once('exit', r));
    process.kill(this.child.pid!, 'SIGKILL');
    await gone;
  }

  /**
   * Under the fd-store stand-in: stop nasd and start it again, the kernel connection kept (SIGHUP to the stand-in,
   * which is what the child's pid is). Resolves once the new nasd is ready.
   */
  async restartKeepingConnection(): Promise<void> {
    if (!this.opts.fdStore) throw new Error('restartKeepingConnection needs { fdStore: true }');
    const readies = () => this.log.split('"nasd ready"').length - 1;
    const before = readies();
    process.kill(this.child.pid!, 'SIGHUP');
    for (let i = 0; i < 600 && readies() === before; i++) await new Promise((r) => setTimeout(r, 50));
    if (readies() === before) throw new Error(`nasd was not ready again after 30 s:\n${this.log}`);
  }

  /** `systemctl reload`: SIGHUP to nasd, which becomes the next nasd in the same process; resolves once it serves again. */
  async reload(): Promise<void> {
    if (this.opts.fdStore) throw new Error('reload signals nasd itself: start it without { fdStore: true }');
    const readies = () => this.log.split('"nasd ready"').length - 1;
    const before = readies();
    process.kill(this.child.pid!, 'SIGHUP');
    for (let i = 0; i < 600 && readies() === before && this.child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 50));
    if (readies() === before) throw new Error(`nasd was not ready again after its reload:\n${this.log}`);
  }

  async restart(): Promise<TestDaemon> {
    return TestDaemon.start({ ...this.opts, dir: this.dir });
  }

  async cleanup(): Promise<void> {
    await this.stop();
    await removeTree(this.dir);
  }
}

/**
 * Each test daemon's dir holds this record: the test process that started it and the daemon, each with its
 * start time (so a reused pid is not mistaken for them). The global sweep cleans up only after test processes
 * that are gone, whichever run they belonged to, and kills a leftover daemon by its pid, never by name.
 */
export const OWNER_FILE = 'test-owner.json';

export interface ProcessId {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: the start time, in clock ticks since boot. */
  start: string;
}

export interface OwnerRecord {
  test: ProcessId;
  /** The test process's parent: the vitest run (its global teardown knows its own leftovers by it). */
  runner: ProcessId | null;
  daemon: ProcessId;
  mnt: string;
}

export function processId(pid: number): ProcessId | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: count fields after its closing parenthesis.
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return start ? { pid, start } : null;
  } catch {
    return null;
  }
}

/** Whether this very process (same pid and start time) still runs. */
export function stillRunning(p: ProcessId): boolean {
  return processId(p.pid)?.start === p.start;
}

async function writeOwner(dir: string, daemonPid: number, mnt: string): Promise<void> {
  const test = processId(process.pid);
  const daemon = processId(daemonPid);
  if (!test || !daemon) return; // the daemon died at once: there is nothing to sweep
  const record: OwnerRecord = { test, runner: processId(process.ppid), daemon, mnt };
  await fs.writeFile(`${dir}/${OWNER_FILE}.tmp`, JSON.stringify(record));
  await fs.rename(`${dir}/${OWNER_FILE}.tmp`, `${dir}/${OWNER_FILE}`);
}

export async function isMounted(mnt: string): Promise<boolean> {
  const text = await fs.readFile('/proc/mounts', 'utf8');
  return text.split('\n').some((l) => l.split(' ')[1] === mnt);
}

export async function unmountIfMounted(mnt: string): Promise<void> {
  if (await isMounted(mnt)) await run('fusermount', ['-uz', mnt]);
}

/** rm -rf: coreutils walks a tree by directory descriptors, so paths near PATH_MAX go too (fs.rm fails on them). */
export async function removeTree(dir: string): Promise<void> {
  const r = await run('rm', ['-rf', '--', dir]);
  if (r.code !== 0) throw new Error(`rm -rf ${dir}: ${r.stderr}`);
}

/** Wait until check() holds (commits are batched, so tests poll instead of sleeping a fixed time). */
export async function eventually<T>(check: () => Promise<T | false | undefined | null>, what: string, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The errno code a promise rejects with (or 'OK'). Node has no name for EDQUOT, so it is named here. */
export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'OK';
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.errno === -os.constants.errno.EDQUOT) return 'EDQUOT';
    return err.code ?? String(e);
  }
}
