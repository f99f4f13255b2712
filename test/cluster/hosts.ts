import fs from 'node:fs/promises';
import path from 'node:path';
import os from 'node:os';
import { TestDaemon, run, eventually, type RunResult } from '../helpers.js';
import type { EtcdCluster, GitServer } from './harness.js';

/**
 * nasd hosts of a test cluster: each its own state, mount point, control socket and nasd.yaml with a
 * `cluster:` block naming the shared etcd and git server. Started and stopped by pid (TestDaemon).
 */

export interface HostOptions {
  name: string;
  dir: string;
  etcd: EtcdCluster;
  git: GitServer;
  ttl?: string;
  demo?: boolean;
  homes?: string[] | 'all';
  /** NAS_TEST_CLUSTER_CRASH_AT: the writer kills itself there (after-merge, after-push, after-publish). */
  crashAt?: string;
  /** Settings written over the cluster block's (bad input). */
  override?: Record<string, unknown>;
  /** How long start() waits for nasd to be ready (TestDaemon's 15 s unless given). */
  readyMs?: number;
  /** nasd.yaml's text as given, instead of the block made from these options (malformed YAML). */
  raw?: string;
  /** Run nasd in this network namespace (netns.ts), with a mount namespace of its own: its mount is reached through nsenter. */
  netns?: string;
  /** More environment for nasd (a clock ahead: faketime). */
  env?: NodeJS.ProcessEnv;
  /** nasd's --log-level (default info). */
  logLevel?: string;
}

export function clusterYaml(o: HostOptions): string {
  const block: Record<string, unknown> = {
    host: o.name,
    git: { url: o.git.url('{home}'), timeout: '10s' },
    etcd: { endpoints: o.etcd.endpoints, prefix: '/agent-nas-test', timeout_ms: 1500 },
    writer_ttl: o.ttl ?? '2s',
    reconcile: '3s',
    push: 'commit',
    homes: o.homes ?? 'all',
    ...o.override,
  };
  return `cluster: ${JSON.stringify(block)}\n`;
}

export class ClusterHost {
  daemon!: TestDaemon;
  /** The logs of this host's earlier daemons (before a restart). */
  readonly earlier: string[] = [];
  constructor(readonly o: HostOptions) {}

  get dir(): string {
    return this.o.dir;
  }

  get mnt(): string {
    return this.daemon.mnt;
  }

  /** Start (or start again, with the same state) with these options. */
  async start(changes: Partial<HostOptions> = {}): Promise<this> {
    Object.assign(this.o, changes);
    await fs.mkdir(this.o.dir, { recursive: true });
    await fs.chmod(this.o.dir, 0o755);
    const config = path.join(this.o.dir, 'nasd.yaml');
    await fs.writeFile(config, this.o.raw ?? clusterYaml(this.o));
    if (this.daemon) this.earlier.push(this.daemon.log);
    this.daemon = await TestDaemon.start({
      dir: this.o.dir,
      extraArgs: ['--config', config, ...(this.o.demo ? ['--demo'] : []), ...(this.logLevel ? ['--log-level', this.logLevel] : [])],
      env: { NAS_TEST_CLUSTER_CRASH_AT: this.o.crashAt ?? '', ...this.o.env },
      ...(this.o.readyMs ? { readyMs: this.o.readyMs } : {}),
      ...(this.o.netns ? { prefix: ['ip', 'netns', 'exec', this.o.netns] } : {}),
    });
    return this;
  }

  /** The option's, else NAS_TEST_CLUSTER_LOG_LEVEL (debug: the writer's per-batch timings in the logs kept). */
  private get logLevel(): string | undefined {
    return this.o.logLevel ?? (process.env.NAS_TEST_CLUSTER_LOG_LEVEL || undefined);
  }

  get pid(): number {
    return this.daemon.child.pid!;
  }

  alive(): boolean {
    return this.daemon.child.exitCode === null && this.daemon.child.signalCode === null;
  }

  nas(...args: string[]): Promise<RunResult> {
    return this.daemon.nas(...args);
  }

  async nasJson<T = any>(...args: string[]): Promise<T> {
    return this.daemon.nasJson<T>(...args);
  }

  /** A branch with one file written through this host's mount and committed. */
  async branchWith(branch: string, rel: string, content: string): Promise<void> {
    const made = await this.nas('branch', 'create', `demo/${branch}`);
    if (made.code !== 0) throw new Error(`${this.o.name}: branch create ${branch}: ${made.stderr}`);
    await this.writeFile(this.daemon.path(`demo@${branch}`, rel), content);
    await this.daemon.sync(`demo/${branch}`);
  }

  /** Write a file through the mount (creating its folder): directly, or from inside nasd's mount namespace. */
  async writeFile(file: string, content: string): Promise<void> {
    if (!this.o.netns) {
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(file, content);
      return;
    }
    const r = await run('nsenter', ['-t', String(this.pid), '-m', 'sh', '-c', 'mkdir -p "$(dirname "$1")" && cat > "$1"', 'sh', file], { input: content });
    if (r.code !== 0) throw new Error(`${this.o.name}: writing ${file} in nasd's mount namespace: ${r.stderr}`);
  }

  /** A file's text read through the mount (null: cannot be read). */
  async readFile(file: string): Promise<string | null> {
    if (!this.o.netns) return fs.readFile(file, 'utf8').catch(() => null);
    const r = await run('nsenter', ['-t', String(this.pid), '-m', 'cat', file]);
    return r.code === 0 ? r.stdout : null;
  }

  /** Propose a branch; the PR's state, or the refusal. */
  async propose(branch: string, intent = `change ${branch}`): Promise<{ code: number; state?: string; id?: number; stderr: string }> {
    const r = await this.nas('--json', 'propose', `demo/${branch}`, '--intent', intent);
    if (r.code !== 0) return { code: r.code, stderr: r.stderr };
    const pr = JSON.parse(r.stdout) as { id: number; state: string };
    return { code: 0, state: pr.state, id: pr.id, stderr: r.stderr };
  }

  /** A fresh branch with one file, proposed: the PR's state (and it is counted by no tally: a side test's). */
  async proposeBranch(branch: string): Promise<{ state?: string; stderr: string }> {
    await this.branchWith(branch, `outbox/side/${branch}.txt`, `${branch}\n`);
    return this.propose(branch);
  }

  /** Who holds the writer role of a Home, as this host's `nas cluster status` says. */
  async writerOf(role = 'demo'): Promise<string | null> {
    const s = await this.nasJson<{ homes: { role: string; writer: string | null }[] }>('cluster', 'status');
    return s.homes.find((h) => h.role === role)?.writer ?? null;
  }

  async stop(): Promise<void> {
    await this.daemon?.stop();
  }

  async kill(): Promise<void> {
    await this.daemon?.kill();
    await run('fusermount', ['-uz', this.daemon.mnt]);
  }
}

/** The writer of a Home as etcd has it (null: none), read with etcdctl. */
export async function writerInEtcd(etcd: EtcdCluster, role = 'demo'): Promise<string | null> {
  const r = await etcd.etcdctl(['get', `/agent-nas-test/homes/${role}/writer`, '--print-value-only']);
  const text = r.stdout.trim();
  return text ? (JSON.parse(text) as { host: string }).host : null;
}

/** Wait until some host other than `not` holds the role; the time it took. */
export async function newWriter(etcd: EtcdCluster, not: string, ms = 15_000): Promise<{ host: string; ms: number }> {
  const started = performance.now();
  const host = await eventually(async () => {
    const w = await writerInEtcd(etcd);
    return w && w !== not ? w : null;
  }, `a writer other than ${not}`, ms);
  return { host, ms: Math.round(performance.now() - started) };
}

/** main on the git server: every merge commit's Nas-Proposal trailer, in order. */
export async function proposalsOnMain(repo: string): Promise<string[]> {
  const r = await run('git', ['--git-dir', repo, 'log', '--first-parent', '--format=%(trailers:key=Nas-Proposal,valueonly)', 'main']);
  if (r.code !== 0) throw new Error(`git log: ${r.stderr}`);
  return r.stdout.split('\n').map((l) => l.trim()).filter(Boolean);
}

/** The files under a folder of main on the git server. */
export async function filesOnMain(repo: string, folder: string): Promise<string[]> {
  const r = await run('git', ['--git-dir', repo, 'ls-tree', '--name-only', `main:${folder}`]);
  return r.code === 0 ? r.stdout.split('\n').filter(Boolean) : [];
}

export async function fsck(repo: string): Promise<boolean> {
  return (await run('git', ['--git-dir', repo, 'fsck', '--strict', '--no-progress'])).code === 0;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Each host's nasd logs (every start) in <tmp>/<name>/<host>.log, for a failure's reading (overwritten by the next run); the folder. */
export async function keepLogs(hosts: ClusterHost[], name: string): Promise<string> {
  const logs = path.join(os.tmpdir(), name);
  await fs.mkdir(logs, { recursive: true });
  for (const h of hosts) await fs.writeFile(path.join(logs, `${h.o.name}.log`), [...h.earlier, h.daemon?.log ?? ''].join('')).catch(() => undefined);
  return logs;
}
