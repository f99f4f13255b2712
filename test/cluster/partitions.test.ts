import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { existsSync, readdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DIR_PREFIX, eventually, removeTree, run } from '../helpers.js';
import { startEtcd, startGitServer, type EtcdCluster, type GitServer } from './harness.js';
import { ClusterHost, filesOnMain, keepLogs, newWriter, writerInEtcd } from './hosts.js';
import { Net } from './netns.js';
import { rankFor } from '../../src/cluster/hosts.js';
import { expectNothingLost, Ledger, settledWriter, type Proposed } from './tally.js';

/**
 * The cluster through network partitions: the git server and each of three hosts in its own network namespace
 * (netns.ts), joined by a bridge; one etcd member per host namespace; nasd in each host namespace with its own
 * mount namespace, state, mount point and cluster: block. A partition is nft rules in a host's namespace:
 * the host cut off entirely, the host cut off from etcd only, an etcd member cut off from its peers; and one
 * host's clock 300 s ahead (faketime: leases run on etcd's clock, so nothing changes). Every scenario prints a
 * row of the table and shows nothing lost, nothing merged twice, the git server's repository fsck-clean.
 */

const TTL_S = 4;

/** libfaketime's library for threaded programs (Debian's faketime), under the machine's multiarch folder. */
function faketimeLib(): string {
  for (const d of readdirSync('/usr/lib')) if (existsSync(`/usr/lib/${d}/faketime/libfaketimeMT.so.1`)) return `/usr/lib/${d}/faketime/libfaketimeMT.so.1`;
  throw new Error('libfaketimeMT.so.1 not found under /usr/lib/*/faketime/: apt-get install faketime');
}

let dir: string;
let net: Net | undefined;
let etcd: EtcdCluster | undefined;
let git: GitServer | undefined;
let repo: string;
const hosts: ClusterHost[] = [];
/** What the test did when, written beside the nasd logs (a failure's reading). */
const steps: string[] = [];
const step = (what: string) => steps.push(`${new Date().toISOString()} ${what}`);
const ledger = new Ledger(() => repo, step);
const mainFile = (h: ClusterHost, file: string) => path.join(h.mnt, 'demo/outbox/cluster', file);

/** Wait until a file merged on main reads through a host's mount (inside its mount namespace). */
async function seenThrough(h: ClusterHost, file: string, ms = 15_000): Promise<number> {
  const started = performance.now();
  await eventually(() => h.readFile(mainFile(h, file)), `${file} through host ${h.o.name}'s mount`, ms);
  return Math.round(performance.now() - started);
}

/** Who pushed main on the git server, oldest first: the pushing host's address (http-backend's reflog identity). */
async function mainPushes(): Promise<string[]> {
  const r = await run('git', ['--git-dir', repo, 'reflog', 'show', '--format=%ge', 'refs/heads/main']);
  return r.stdout.split('\n').filter(Boolean).map((e) => e.replace(/^.*@http\./, '')).reverse();
}

/** After a cut of host `cut`: no push of main from it once another host's push was taken (the fence holds). */
function pushedAfterLosing(pushes: string[], cut: string): number {
  const other = pushes.findIndex((ip) => ip !== cut);
  return other < 0 ? 0 : pushes.slice(other).filter((ip) => ip === cut).length;
}

/**
 * Move etcd's leadership off member i, if it holds it: a host cut off with the leader waits for etcd's election
 * too. A new leader extends every lease by its election timeout (etcd's default 1 s): that is waited out, so
 * what the cut ends is the host's own TTL.
 */
async function leaderAwayFrom(i: number): Promise<void> {
  const leader = await etcd!.leader();
  if (leader !== i) return;
  const to = (i + 1) % 3;
  const status = await etcd!.etcdctl(['endpoint', 'status', '-w', 'json'], [etcd!.endpoints[to]!]);
  const id = /"member_id":\s*(\d+)/.exec(status.stdout)?.[1];
  if (!id) throw new Error(`no member id for m${to}: ${status.stdout}${status.stderr}`);
  const moved = await etcd!.etcdctl(['move-leader', BigInt(id).toString(16)], [etcd!.endpoints[leader]!]);
  if (moved.code !== 0) throw new Error(`etcdctl move-leader: ${moved.stderr}`);
  await eventually(async () => (await etcd!.leader()) !== i, `etcd's leader to leave m${i}`);
  await new Promise((r) => setTimeout(r, 1000 + TTL_S * 1000 + 500));
}

/**
 * A new writer other than `not`, and how long after `since` (ms since the epoch) it took the role: by the new
 * writer's own log line, stamped when its election transaction came back (etcdctl's polling from the test lags
 * by up to a second on a loaded machine).
 */
async function newWriterSince(not: ClusterHost, since: number): Promise<{ host: string; ms: number }> {
  const polled = await newWriter(etcd!, not.o.name);
  const h = hosts.find((x) => x.o.name === polled.host)!;
  const at = h.daemon.log.split('\n').map((l) => {
    try {
      return JSON.parse(l) as { time: number; msg: string };
    } catch {
      return null;
    }
  }).find((e) => e && e.msg === 'cluster: this host is the merge writer of the Home' && e.time >= since)?.time;
  step(`new writer ${polled.host}: seen by etcdctl after ${polled.ms} ms, by its log after ${at === undefined ? '?' : at - since} ms`);
  return { host: polled.host, ms: at === undefined ? polled.ms : at - since };
}

/** The host ranked first for the Home (rendezvous hashing): where its writer role settles. */
function rankedFirst(): ClusterHost {
  const first = rankFor('demo', hosts.map((h) => ({ host: h.o.name, homes: 'all', version: '', started: '', pid: 0 })))[0];
  return hosts.find((h) => h.o.name === first)!;
}

/** Wait until the writer role is settled on the host ranked first (after a heal it moves back there). */
async function writerSettledOnFirst(): Promise<ClusterHost> {
  const first = rankedFirst();
  await eventually(async () => (await writerInEtcd(etcd!)) === first.o.name, `the writer role on ${first.o.name}`, 45_000);
  const w = await settledWriter(etcd!, hosts);
  expect(w.o.name).toBe(first.o.name);
  return w;
}

async function hostRecord(name: string): Promise<boolean> {
  return (await etcd!.etcdctl(['get', `/agent-nas-test/hosts/${name}`, '--keys-only'])).stdout.trim() !== '';
}

/** A proposal answered "queued on this host" (etcd out of reach): a promise to send it, held to like an acknowledgement. */
/**
 * What an agent writes during a cut, in a branch made before it (a new branch name is claimed in etcd): a file
 * under outbox/cluster/, committed. Its name.
 */
async function writeDuring(h: ClusterHost, made: { branch: string; n: number }): Promise<string> {
  const file = `f${made.n}-during-cut.txt`;
  await h.writeFile(h.daemon.path(`demo@${made.branch}`, `outbox/cluster/${file}`), `written during the cut on ${h.o.name}\n`);
  await h.daemon.sync(`demo/${made.branch}`);
  return file;
}

/** A new writer's time against the bound, for the table (printed, never asserted: the machine's load moves it). */
const within = (ms: number) => `${ms <= (TTL_S + 1) * 1000 ? 'within' : 'NOT within'} TTL ${TTL_S} s + 1 s`;

function queuedLocally(r: Proposed): string | null {
  return /queued on this host as (\S+?)[:,;]? /.exec(r.stderr)?.[1] ?? null;
}

describe('the cluster through network partitions (network namespaces)', () => {
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), `${DIR_PREFIX}partitions-`));
    await fs.chmod(dir, 0o755);
    net = await Net.create(['git', 'a', 'b', 'c']);
    const n = net;
    etcd = await startEtcd({ members: 3, dir: path.join(dir, 'etcd'), places: ['a', 'b', 'c'].map((p) => ({ ns: n.ns(p), ip: n.ip(p) })), vantage: n.exec('switch') });
    git = await startGitServer({ dir: path.join(dir, 'git'), ns: n.ns('git'), host: n.ip('git') });
    repo = await git.createRepo('demo');
    // Every update of main logged with who pushed it (http-backend: anonymous@http.<address>).
    await run('git', ['--git-dir', repo, 'config', 'core.logAllRefUpdates', 'always']);
    for (const name of ['a', 'b', 'c']) {
      const h = new ClusterHost({ name, dir: path.join(dir, name), etcd, git, demo: name === 'a', ttl: `${TTL_S}s`, netns: n.ns(name), logLevel: process.env.NAS_TEST_NASD_LOG_LEVEL });
      hosts.push(h);
      await h.start();
    }
  }, 120_000);

  afterAll(async () => {
    const logs = await keepLogs(hosts, 'agent-nas-partition-logs');
    await fs.writeFile(path.join(logs, 'steps.log'), `${steps.join('\n')}\n`);
    for (const m of etcd?.members ?? []) await fs.copyFile(m.log, path.join(logs, `etcd-${m.name}.log`)).catch(() => undefined);
    for (const h of hosts) await h.stop().catch(() => undefined);
    await git?.stop().catch(() => undefined);
    await etcd?.stop().catch(() => undefined);
    await net?.destroy();
    await ledger.print('cluster partition scenarios', 'agent-nas-partition-results.md');
    if (dir) await removeTree(dir);
  }, 60_000);

  beforeEach((ctx) => void step(`--- ${ctx.task.name}`));

  it('steady: every host in its own namespace serves the Home; proposals from each land once and show everywhere', async () => {
    const done = await Promise.all(hosts.map((h) => ledger.proposeFrom(h)));
    for (const d of done) expect(d.stderr).toBe('');
    for (const d of done) expect(d.state).toBe('merged');
    const seen = await Promise.all(done.flatMap((d) => hosts.map((h) => seenThrough(h, d.file))));
    const row = await ledger.tally('steady (namespaces)', `3 proposals at once; readable through every mount within ${Math.max(...seen)} ms`);
    expectNothingLost(row);
  });

  it('the writer\'s host cut off from etcd only: another host writes within TTL + 1 s; its proposal waits and is sent on heal', async () => {
    const w = await writerSettledOnFirst();
    step(`writer settled on ${w.o.name}`);
    const wip = net!.ip(w.o.name);
    const others = hosts.filter((h) => h !== w);
    const before = (await mainPushes()).length;
    // Made before the cut: a new branch name is claimed in etcd (the cut-off host refuses to make one).
    const made = await ledger.branch(w);
    await net!.cut(w.o.name, 'etcd');
    const cutAt = Date.now();
    step(`cut ${w.o.name} from etcd`);
    let took: { host: string; ms: number };
    let waiting: Proposed;
    let followed: number;
    let pushes: string[];
    try {
      took = await newWriterSince(w, cutAt);
      const during = await Promise.all(others.map((h) => ledger.proposeFrom(h)));
      for (const d of during) expect(d.stderr).toBe('');
      for (const d of during) expect(d.state).toBe('merged');
      // The cut-off host still follows main from the git server (its reconcile), and its agents keep working.
      followed = await seenThrough(w, during[0]!.file, 20_000);
      const later = await writeDuring(w, made);
      waiting = await ledger.propose(w, made);
      expect(waiting.ok).toBe(false);
      const id = queuedLocally(waiting);
      expect(id, waiting.stderr).toBeTruthy();
      ledger.acknowledged.push({ id: id!, files: [waiting.file, later] });
      pushes = (await mainPushes()).slice(before);
    } finally {
      await net!.heal(w.o.name);
      step(`healed ${w.o.name}`);
    }
    const healed = performance.now();
    await eventually(() => hostRecord(w.o.name), `host ${w.o.name} to rejoin`, 20_000);
    await eventually(async () => (await filesOnMain(repo, 'outbox/cluster')).includes(waiting.file), `${waiting.file} (queued on the cut-off host) on main`, 30_000);
    const landed = Math.round(performance.now() - healed);
    // main moved during the cut, pushed by the new writer's address; never by the cut-off one after that.
    expect(pushes.filter((ip) => ip !== wip).length).toBeGreaterThan(0);
    expect(pushedAfterLosing(pushes, wip)).toBe(0);
    const row = await ledger.tally('writer\'s host cut off from etcd', `new writer ${took.host} ${took.ms} ms after the cut (${within(took.ms)}); ` +
      `the cut-off host followed main in ${followed} ms; its proposal queued there landed ${landed} ms after heal`);
    expectNothingLost(row);
  }, 90_000);

  it('the writer\'s host cut off entirely: another host writes within TTL + 1 s; after heal it rejoins, follows main and its branch merges', async () => {
    const w = await writerSettledOnFirst();
    step(`writer settled on ${w.o.name}`);
    const wip = net!.ip(w.o.name);
    const others = hosts.filter((h) => h !== w);
    await leaderAwayFrom(hosts.indexOf(w));
    step(`etcd's leader is m${await etcd!.leader()}`);
    const before = (await mainPushes()).length;
    const made = await ledger.branch(w);
    await net!.cut(w.o.name, 'all');
    const cutAt = Date.now();
    step(`cut ${w.o.name} off entirely`);
    let took: { host: string; ms: number };
    let during: Proposed[];
    let later: string;
    let pushes: string[];
    try {
      took = await newWriterSince(w, cutAt);
      during = await Promise.all(others.map((h) => ledger.proposeFrom(h)));
      for (const d of during) expect(d.stderr).toBe('');
      for (const d of during) expect(d.state).toBe('merged');
      // Its agents keep writing branches; a proposal cannot reach the git server and is refused, nothing half-done.
      later = await writeDuring(w, made);
      const refused = await ledger.propose(w, made);
      expect(refused.ok).toBe(false);
      expect(refused.stderr).toMatch(/cannot push demo@\S+ to the git server, so nothing was proposed/);
      pushes = (await mainPushes()).slice(before);
    } finally {
      await net!.heal(w.o.name);
      step(`healed ${w.o.name}`);
    }
    const healed = performance.now();
    await eventually(() => hostRecord(w.o.name), `host ${w.o.name} to rejoin`, 20_000);
    const rejoined = Math.round(performance.now() - healed);
    const followed = await seenThrough(w, during[1]!.file, 20_000);
    const again = await ledger.propose(w, made);
    expect(again.stderr).toBe('');
    expect(again.state).toBe('merged');
    expect(await filesOnMain(repo, 'outbox/cluster')).toContain(later);
    // main moved during the cut, pushed by the new writer's address; never by the cut-off one after that.
    expect(pushes.filter((ip) => ip !== wip).length).toBeGreaterThan(0);
    expect(pushedAfterLosing(pushes, wip)).toBe(0);
    const row = await ledger.tally('writer\'s host cut off entirely', `new writer ${took.host} ${took.ms} ms after the cut (${within(took.ms)}); ` +
      `rejoined ${rejoined} ms after heal, following main ${followed} ms later; its proposal during the cut refused (the git server out of reach), merged after`);
    expectNothingLost(row);
  }, 90_000);

  it('an etcd member isolated from its peers (the leader): proposals from every host go on', async () => {
    const leader = await etcd!.leader();
    const place = ['a', 'b', 'c'][leader]!;
    await net!.cut(place, 'peers');
    step(`cut etcd member m${leader} (host ${place}) from its peers`);
    let ms: number[];
    try {
      const done = await Promise.all(hosts.map((h) => ledger.proposeFrom(h)));
      for (const d of done) expect(d.stderr).toBe('');
      for (const d of done) expect(d.state).toBe('merged');
      ms = done.map((d) => Math.round(d.ms));
    } finally {
      await net!.heal(place);
      step(`healed ${place}`);
    }
    await eventually(async () => (await etcd!.etcdctl(['endpoint', 'health'], [etcd!.endpoints[leader]!])).code === 0, `etcd member m${leader} healthy again`, 20_000);
    const row = await ledger.tally('etcd leader isolated', `member m${leader} (host ${place}) cut from its peers; 3 proposals answered in ${ms.join(', ')} ms`);
    expectNothingLost(row);
  }, 90_000);

  it('one host\'s clock 300 s ahead: nothing changes (the writer comes back to it, proposals land once)', async () => {
    const w = rankedFirst();
    await w.stop();
    await w.start({ env: { LD_PRELOAD: faketimeLib(), FAKETIME: '+300', FAKETIME_DONT_FAKE_MONOTONIC: '1' } });
    step(`${w.o.name} restarted with its clock 300 s ahead`);
    // The host ranked first for the Home takes its writer role back once it has been up a while, whatever its clock says.
    const restarted = performance.now();
    await eventually(async () => (await writerInEtcd(etcd!)) === w.o.name, `the writer role back on ${w.o.name}`, 45_000);
    const backMs = Math.round(performance.now() - restarted);
    const done = await Promise.all(hosts.map((h) => ledger.proposeFrom(h)));
    for (const d of done) expect(d.stderr).toBe('');
    for (const d of done) expect(d.state).toBe('merged');
    expect(await writerInEtcd(etcd!)).toBe(w.o.name);
    const row = await ledger.tally('one host\'s clock 300 s ahead', `host ${w.o.name} (faketime +300 s) writer again ${backMs} ms after its restart; 3 proposals answered in ${done.map((d) => Math.round(d.ms)).join(', ')} ms`);
    expectNothingLost(row);
  }, 90_000);
});
