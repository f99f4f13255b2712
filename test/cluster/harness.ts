/**
 * Real parts for the cluster tests: etcd members (election, queue) and a git forge over smart HTTP (the Homes'
 * source of truth), all on loopback. Every process started here is stopped by its pid; the caller owns `dir`
 * and removes it (removeTree) after stop().
 *
 * Each process is started through `setpriv --pdeathsig KILL`: should the test process die without its
 * afterAll, the kernel kills what it started (by its own death, not by any name). The pid is still the
 * program's own: setpriv execs it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { run, type RunResult } from '../helpers.js';

const GIT_SERVER = path.join(import.meta.dirname, 'git-server.mjs');

/** Ports bound at once on 127.0.0.1:0 and then released: free right now and different from each other. */
export async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      servers.push(s);
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(0, '127.0.0.1', () => resolve());
      });
    }
    return servers.map((s) => (s.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}

/** The last lines of a log file ('' when there is none yet), for error messages. */
export function logTail(file: string, lines = 40): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines - 1).join('\n');
  } catch {
    return '';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The environment without the variables etcd and etcdctl take as flags (ETCD_*, ETCDCTL_*): only our flags count. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('ETCD')) env[k] = v;
  return env;
}

/** One started program: its output appended to a log file, its exit awaited. */
class Proc {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  private failed = false;

  /** prefix: what runs it, e.g. `ip netns exec NS` (netns.ts); each execs the next, so the pid stays the program's. */
  constructor(cmd: string, args: string[], readonly log: string, env: NodeJS.ProcessEnv, stdout: 'log' | 'pipe' = 'log', prefix: string[] = []) {
    // The file itself as stderr (and stdout unless asked for), not a pipe to us: the log is complete even when
    // the test process is stuck.
    const fd = fs.openSync(log, 'a');
    try {
      const argv = [...prefix, 'setpriv', '--pdeathsig', 'KILL', cmd, ...args];
      this.child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', stdout === 'log' ? fd : 'pipe', fd] });
    } finally {
      fs.closeSync(fd);
    }
    this.exited = new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      // Not started at all (no setpriv): it counts as exited, and the caller's wait for it to be ready fails.
      this.child.once('error', (err) => {
        this.failed = true;
        fs.appendFileSync(log, `--- harness: ${cmd} did not start: ${err.message}\n`);
        resolve();
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return !this.failed && this.child.exitCode === null && this.child.signalCode === null;
  }

  signal(sig: NodeJS.Signals): void {
    if (this.running) process.kill(this.pid, sig);
  }

  /** SIGTERM (SIGCONT first: a stopped process acts on nothing else), then SIGKILL after graceMs; waits for the exit. */
  async stop(graceMs = 5_000): Promise<void> {
    if (!this.running) return;
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exited, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    if (this.running) {
      this.signal('SIGKILL');
      await this.exited;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// etcd

export interface EtcdMember {
  name: string;
  clientUrl: string;
  peerUrl: string;
  dataDir: string;
  log: string;
  /** The running process's pid; null while the member is down (killed, not yet restarted). */
  readonly pid: number | null;
}

export interface EtcdCluster {
  /** Client URLs, member i at index i: http://127.0.0.1:<port>. */
  endpoints: string[];
  members: EtcdMember[];
  /**
   * Send a signal to member i by its pid. SIGKILL, SIGTERM and SIGINT wait for the exit; any other signal
   * (SIGSTOP to freeze a member, SIGCONT to thaw it) returns at once.
   */
  kill(i: number, signal?: NodeJS.Signals): Promise<void>;
  /** Start member i again with its data dir and ports; resolves once it answers healthy (needs a quorum up). */
  restart(i: number): Promise<void>;
  /** The index of the member that is leader now, asked of the running members (waits up to 10 s for one). */
  leader(): Promise<number>;
  /** etcdctl against the running members (or the `endpoints` given), never throwing. */
  etcdctl(args: string[], endpoints?: string[]): Promise<RunResult>;
  /** SIGTERM then SIGKILL to every member by pid; waits for them all to exit. */
  stop(): Promise<void>;
}

/** etcdctl (API v3) against these endpoints, with short timeouts: a member that is down must not stall a test. */
export function etcdctl(endpoints: string[], args: string[], input?: string, prefix: string[] = []): Promise<RunResult> {
  const argv = [...prefix, 'etcdctl', `--endpoints=${endpoints.join(',')}`, '--dial-timeout=1s', '--command-timeout=3s', ...args];
  return run(argv[0]!, argv.slice(1), {
    env: { ...cleanEnv(), ETCDCTL_API: '3' },
    input,
  });
}

/**
 * An etcd cluster of 1 or 3 members on loopback, data and logs under dir (`m<i>/`, `m<i>.log`). Resolves once
 * `etcdctl endpoint health` says every member is healthy. heartbeatMs/electionMs are etcd's
 * --heartbeat-interval/--election-timeout (etcd's defaults: 100 and 1000).
 */
export async function startEtcd(opts: {
  members: 1 | 3; dir: string; heartbeatMs?: number; electionMs?: number;
  /**
   * Member i in network namespace `places[i].ns` on its address (ports 2379 and 2380 there: each has its own),
   * etcdctl run through `vantage` (a command prefix into a namespace that reaches them all). Default: loopback.
   */
  places?: { ns: string; ip: string }[]; vantage?: string[];
}): Promise<EtcdCluster> {
  fs.mkdirSync(opts.dir, { recursive: true });
  const n = opts.members;
  const ports = opts.places ? opts.places.flatMap(() => [2379, 2380]) : await freePorts(2 * n);
  const at = (i: number) => opts.places?.[i]?.ip ?? '127.0.0.1';
  const etcdctlHere = (eps: string[], args: string[]) => etcdctl(eps, args, undefined, opts.vantage);
  const token = `nas-test-${randomBytes(6).toString('hex')}`;
  const procs: (Proc | null)[] = new Array(n).fill(null);
  const members: EtcdMember[] = Array.from({ length: n }, (_, i) => ({
    name: `m${i}`,
    clientUrl: `http://${at(i)}:${ports[2 * i]}`,
    peerUrl: `http://${at(i)}:${ports[2 * i + 1]}`,
    dataDir: path.join(opts.dir, `m${i}`),
    log: path.join(opts.dir, `m${i}.log`),
    get pid() {
      const p = procs[i];
      return p && p.running ? p.pid : null;
    },
  }));
  const initialCluster = members.map((m) => `${m.name}=${m.peerUrl}`).join(',');
  const endpoints = members.map((m) => m.clientUrl);

  const spawnMember = (i: number) => {
    const m = members[i]!;
    const args = [
      '--name', m.name, '--data-dir', m.dataDir,
      '--listen-client-urls', m.clientUrl, '--advertise-client-urls', m.clientUrl,
      '--listen-peer-urls', m.peerUrl, '--initial-advertise-peer-urls', m.peerUrl,
      // Ignored by a member whose data dir already holds the cluster (a restart): it rejoins as itself.
      '--initial-cluster', initialCluster, '--initial-cluster-state', 'new', '--initial-cluster-token', token,
      '--logger', 'zap', '--log-outputs', 'stderr',
      // Every proposal and merge writes keys (with their objects): history kept a minute, as an operator keeps an hour.
      '--auto-compaction-mode', 'periodic', '--auto-compaction-retention', '1m',
      ...(opts.heartbeatMs ? ['--heartbeat-interval', String(opts.heartbeatMs)] : []),
      ...(opts.electionMs ? ['--election-timeout', String(opts.electionMs)] : []),
    ];
    fs.appendFileSync(m.log, `--- harness: starting ${m.name} at ${new Date().toISOString()}\n`);
    procs[i] = new Proc('etcd', args, m.log, cleanEnv(), 'log', opts.places ? ['ip', 'netns', 'exec', opts.places[i]!.ns] : []);
  };

  const running = () => members.filter((m) => m.pid !== null).map((m) => m.clientUrl);
  const tails = (which: number[]) => which.map((i) => `--- ${members[i]!.log}:\n${logTail(members[i]!.log)}`).join('\n');

  /** Poll `endpoint health` for these members until it passes; fail at once if one of them exits. */
  const waitHealthy = async (which: number[], ms: number) => {
    const until = Date.now() + ms;
    let last: RunResult | null = null;
    for (;;) {
      const dead = which.filter((i) => !procs[i]?.running);
      if (dead.length) throw new Error(`etcd ${dead.map((i) => members[i]!.name).join(', ')} exited before it was healthy\n${tails(dead)}`);
      last = await etcdctlHere(which.map((i) => endpoints[i]!), ['endpoint', 'health']);
      if (last.code === 0) return;
      if (Date.now() > until) {
        throw new Error(`etcd not healthy after ${ms / 1000} s: ${last.stdout}${last.stderr}\n${tails(which)}`);
      }
      await sleep(200);
    }
  };

  const cluster: EtcdCluster = {
    endpoints,
    members,
    async kill(i, signal = 'SIGKILL') {
      const p = procs[i];
      if (!p || !p.running) return;
      p.signal(signal);
      if (signal === 'SIGKILL' || signal === 'SIGTERM' || signal === 'SIGINT') await p.exited;
    },
    async restart(i) {
      if (procs[i]?.running) throw new Error(`etcd ${members[i]!.name} is still running (pid ${procs[i]!.pid})`);
      spawnMember(i);
      await waitHealthy([i], 20_000);
    },
    async leader() {
      const until = Date.now() + 10_000;
      for (;;) {
        const r = await etcdctlHere(running(), ['endpoint', 'status', '-w', 'json']);
        // Member ids are 64-bit: quote every long number before JSON.parse rounds them (and makes two ids equal).
        let status: { Endpoint: string; Status: { header: { member_id: string | number }; leader: string | number } }[] = [];
        try {
          status = JSON.parse(r.stdout.replace(/:\s*(\d{15,})/g, ':"$1"'));
        } catch {
          // a member that does not answer leaves no JSON: ask again
        }
        const leaderId = status.map((s) => String(s.Status.leader)).find((id) => id !== '0');
        const own = status.find((s) => String(s.Status.header.member_id) === leaderId);
        const i = own ? endpoints.indexOf(own.Endpoint) : -1;
        if (i >= 0) return i;
        if (Date.now() > until) throw new Error(`no etcd leader after 10 s: ${r.stdout}${r.stderr}`);
        await sleep(200);
      }
    },
    etcdctl(args, eps) {
      return etcdctlHere(eps ?? running(), args);
    },
    async stop() {
      // One at a time: a leader told to stop hands its leadership to a live member, and waits for that (until
      // SIGKILL) when all of them are stopping at once.
      for (const p of procs) await p?.stop();
    },
  };

  try {
    for (let i = 0; i < n; i++) spawnMember(i);
    await waitHealthy(members.map((_, i) => i), 30_000);
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

// ---------------------------------------------------------------------------------------------------------------
// git forge

export interface GitServer {
  /** The bare repositories: <root>/<home>.git. */
  root: string;
  port: number;
  /** The clone URL of a Home's repository: http://127.0.0.1:<port>/<home>.git. */
  url(home: string): string;
  /** The running server's pid; null while it is stopped. */
  readonly pid: number | null;
  /** `git init --bare` the Home's repository (HEAD on main), as an operator does on the forge. Returns its path. */
  createRepo(home: string): Promise<string>;
  /** SIGTERM then SIGKILL by pid; open connections and requests in flight end with it. */
  stop(): Promise<void>;
  /** Start it again on the same port with the same repositories. */
  restart(): Promise<void>;
}

/** `git init --bare <root>/<home>.git`, HEAD on main, server-side defaults otherwise. Returns its path. */
export async function createRepo(root: string, home: string): Promise<string> {
  const repo = path.join(root, `${home}.git`);
  const r = await run('git', ['init', '-q', '--bare', '--initial-branch=main', repo]);
  if (r.code !== 0) throw new Error(`git init --bare ${repo}: ${r.stderr}`);
  return repo;
}

/**
 * test/cluster/git-server.mjs over <dir>/repos on 127.0.0.1 (a free port unless given), its log in <dir>/git-server.log;
 * with `token`, every request must carry it (Authorization: Bearer); on `host` in network namespace `ns` (netns.ts).
 */
export async function startGitServer(opts: { dir: string; port?: number; token?: string; ns?: string; host?: string }): Promise<GitServer> {
  const host = opts.host ?? '127.0.0.1';
  const root = path.join(opts.dir, 'repos');
  const log = path.join(opts.dir, 'git-server.log');
  fs.mkdirSync(root, { recursive: true });
  let proc: Proc | null = null;

  const launch = async (port: number): Promise<number> => {
    fs.appendFileSync(log, `--- harness: starting the git server on port ${port} at ${new Date().toISOString()}\n`);
    const p = new Proc(process.execPath, [GIT_SERVER, '--root', root, '--listen', `${host}:${port}`, ...(opts.token ? ['--token', opts.token] : [])], log,
      process.env, 'pipe', opts.ns ? ['ip', 'netns', 'exec', opts.ns] : []);
    proc = p;
    let out = '';
    p.child.stdout!.on('data', (d) => (out += d));
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<number>((resolve, reject) => {
        p.child.stdout!.on('data', () => {
          const m = /^listening (\d+)$/m.exec(out);
          if (m) resolve(Number(m[1]));
        });
        p.exited.then(() => reject(new Error(`the git server exited before it listened:\n${logTail(log)}`)));
        timer = setTimeout(() => reject(new Error(`the git server did not listen within 10 s:\n${logTail(log)}`)), 10_000);
      });
    } catch (err) {
      await p.stop();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  };

  const port = await launch(opts.port ?? 0);
  return {
    root,
    port,
    url: (home) => `http://${host}:${port}/${home}.git`,
    get pid() {
      const p = proc;
      return p && p.running ? p.pid : null;
    },
    createRepo: (home) => createRepo(root, home),
    async stop() {
      await proc?.stop();
    },
    async restart() {
      if (proc?.running) throw new Error('the git server is still running');
      await launch(port);
    },
  };
}
