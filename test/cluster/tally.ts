import { expect } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { eventually } from '../helpers.js';
import type { EtcdCluster } from './harness.js';
import { filesOnMain, fsck, proposalsOnMain, writerInEtcd, type ClusterHost } from './hosts.js';

/**
 * What the cluster suites count (cluster.test.ts, partitions.test.ts): every proposal made, every one
 * acknowledged (the propose call returned its PR), and after each scenario a row of the table: how many are on
 * main, lost (acknowledged, not on main: no longer queued once the scenario is over), merged twice, and whether
 * the git server's repository passes `git fsck`.
 */

export interface Row {
  scenario: string;
  proposed: number;
  acknowledged: number;
  onMain: number;
  lost: number;
  twice: number;
  fsck: boolean;
  notes: string;
}

export interface Proposed {
  ok: boolean;
  ms: number;
  state?: string;
  stderr: string;
  file: string;
  branch: string;
  waited?: number;
  published?: number;
}

export class Ledger {
  readonly rows: Row[] = [];
  /** Every proposal acknowledged, with the files it added under outbox/cluster/. */
  readonly acknowledged: { id: string; files: string[] }[] = [];
  proposed = 0;
  seq = 0;

  /** repo: the Home's bare repository on the git server (read directly, not over the network); trace: each proposal's start and end. */
  constructor(private readonly repo: () => string, private readonly trace: (what: string) => void = () => undefined) {}

  /** Make a fresh branch on a host: one new file under outbox/cluster/. */
  async branch(h: ClusterHost): Promise<{ branch: string; file: string; n: number }> {
    const n = ++this.seq;
    const branch = `c${n}-${h.o.name}`;
    const file = `f${n}.txt`;
    await h.branchWith(branch, `outbox/cluster/${file}`, `proposal ${n} from ${h.o.name}\n`);
    return { branch, file, n };
  }

  /** Propose a branch made by branch(); an acknowledgement is counted. */
  async propose(h: ClusterHost, made: { branch: string; file: string; n: number }): Promise<Proposed> {
    this.proposed++;
    const started = performance.now();
    this.trace(`${h.o.name} proposes ${made.branch}`);
    const r = await h.nas('--json', 'propose', `demo/${made.branch}`, '--intent', `cluster proposal ${made.n}`);
    const ms = performance.now() - started;
    this.trace(`${h.o.name} proposed ${made.branch} in ${Math.round(ms)} ms: ${r.code === 0 ? 'acknowledged' : r.stderr.trim().slice(0, 160)}`);
    if (r.code !== 0) return { ok: false, ms, stderr: r.stderr, file: made.file, branch: made.branch };
    const pr = JSON.parse(r.stdout) as { state: string; provenance: { proposal: string }; cluster: { waited_ms: number; published_at: string } };
    this.acknowledged.push({ id: pr.provenance.proposal, files: [made.file] });
    return { ok: true, ms, state: pr.state, stderr: '', file: made.file, branch: made.branch, waited: pr.cluster.waited_ms, published: Date.parse(pr.cluster.published_at) };
  }

  /** Propose a fresh branch from a host. */
  async proposeFrom(h: ClusterHost): Promise<Proposed> {
    return this.propose(h, await this.branch(h));
  }

  /** The invariants after a scenario, as a row: nothing acknowledged missing from main, nothing merged twice, fsck clean. */
  async tally(scenario: string, notes: string): Promise<Row> {
    const onMain = await proposalsOnMain(this.repo());
    const files = new Set(await filesOnMain(this.repo(), 'outbox/cluster'));
    const counts = new Map<string, number>();
    for (const id of onMain) counts.set(id, (counts.get(id) ?? 0) + 1);
    const row: Row = {
      scenario, proposed: this.proposed, acknowledged: this.acknowledged.length, onMain: onMain.length,
      lost: this.acknowledged.filter((a) => !counts.has(a.id) || a.files.some((f) => !files.has(f))).length,
      twice: [...counts.values()].filter((c) => c > 1).length,
      fsck: await fsck(this.repo()), notes,
    };
    this.rows.push(row);
    return row;
  }

  table(): string {
    return ['| scenario | proposed | acknowledged | on main | lost | merged twice | fsck | measured |', '|---|---|---|---|---|---|---|---|',
      ...this.rows.map((r) => `| ${r.scenario} | ${r.proposed} | ${r.acknowledged} | ${r.onMain} | ${r.lost} | ${r.twice} | ${r.fsck ? 'clean' : 'FAILED'} | ${r.notes} |`)].join('\n');
  }

  /** The table on stdout and in <tmp>/<name>. */
  async print(title: string, name: string): Promise<void> {
    const file = path.join(os.tmpdir(), name);
    await fs.writeFile(file, `${this.table()}\n`);
    process.stdout.write(`\n${title} (also in ${file}):\n${this.table()}\n`);
  }
}

export function expectNothingLost(row: Row): void {
  expect(row.lost).toBe(0);
  expect(row.twice).toBe(0);
  expect(row.fsck).toBe(true);
}

/** The host that holds the demo Home's writer role now. */
export async function writerHost(etcd: EtcdCluster, hosts: ClusterHost[]): Promise<ClusterHost> {
  const name = await eventually(() => writerInEtcd(etcd), 'a writer for demo', 15_000);
  return hosts.find((h) => h.o.name === name)!;
}

/** Wait until the writer role settles on one host for a moment (rebalancing moves it once a host rejoins). */
export async function settledWriter(etcd: EtcdCluster, hosts: ClusterHost[], ms = 40_000): Promise<ClusterHost> {
  let last = '';
  let since = performance.now();
  await eventually(async () => {
    const w = (await writerInEtcd(etcd)) ?? '';
    if (w !== last) {
      last = w;
      since = performance.now();
    }
    return w && performance.now() - since > 4000;
  }, 'the writer role to settle', ms);
  return hosts.find((h) => h.o.name === last)!;
}
