import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DIR_PREFIX, removeTree } from '../helpers.js';
import { Home } from '../../src/home/home.js';
import { rankFor, type HostRecord } from '../../src/cluster/hosts.js';
import { mapLimit } from '../../src/util/concurrency.js';
import { startEtcd, startGitServer, type EtcdCluster, type GitServer } from './harness.js';
import { ClusterHost } from './hosts.js';

/**
 * Writers spread over hosts (the issue: "200 Homes on 3 hosts ... writers spread over hosts within ±20%"), with a
 * one-member etcd and the lab git server on loopback. Host a starts with the Homes in its state directory and puts
 * each on the git server; b and c join serving "all" and take them from there. Every Home gets a writer, each on
 * the host rendezvous hashing (hosts.ts rankFor) ranks first for it, and that is asserted Home by Home; then host
 * c stops and its Homes' writers move to a and b, again each to the host ranked first. Counts, times and the CPU
 * each process spent are printed.
 *
 * How many Homes: NAS_SPREAD_HOMES, 30 unless given. 200 does not fit the ~3 minutes this file may take on 2
 * cores: matching a Home with its repository costs some 0.8 CPU-seconds on the host that seeds it (ls-remote and
 * push, with the lab server's git http-backend for each request) and some 0.7 on each host that joins (ls-remote
 * and fetch), so 200 Homes on 3 hosts are ~450 CPU-seconds before any writer moves; measured: host a alone,
 * 200 Homes, ready in 132 s (163 CPU-s with the git server's). The ±20% of the issue is asserted for 200 Homes
 * on the hash itself (the first test): with 30 Homes a host's share varies by more than that (a binomial count),
 * and the live hosts are held to the hash exactly.
 */

const HOMES = Number(process.env.NAS_SPREAD_HOMES ?? 30);
const ISSUE_HOMES = 200;
const roles = Array.from({ length: HOMES }, (_, i) => `s${String(i).padStart(3, '0')}`);
const PREFIX = '/agent-nas-test';
/** How long a step may take: a host spends some 2 git calls on each Home it matches, on 2 cores shared with others. */
const LONG = 60_000 + HOMES * 4000;

let dir: string;
let etcd: EtcdCluster;
let git: GitServer;
const hosts: ClusterHost[] = [];
const lines: string[] = [];

function say(line: string): void {
  lines.push(line);
  process.stdout.write(`spread: ${line}\n`);
}

/** Like eventually(), at a gentler pace: each look is an etcdctl process, and 2 cores serve three nasds. */
async function poll(check: () => Promise<boolean>, what: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * CPU seconds a process and its reaped children used (/proc/<pid>/stat utime, stime, cutime, cstime): nasd with
 * its git processes, the git server with its http-backends. A measure the machine's other load does not change.
 */
async function cpu(pid: number | null | undefined): Promise<number> {
  const [own, children] = await cpuSplit(pid);
  return own + children;
}

/** [the process's own, its reaped children's] CPU seconds. */
async function cpuSplit(pid: number | null | undefined): Promise<[number, number]> {
  if (!pid) return [0, 0];
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  return f.length > 15 ? [(f[11]! + f[12]!) / 100, (f[13]! + f[14]!) / 100] : [0, 0];
}

const cpuText = async (pid: number | null | undefined): Promise<string> => {
  const [own, children] = await cpuSplit(pid);
  return `${(own + children).toFixed(1)} s (${own.toFixed(1)} s node, ${children.toFixed(1)} s its git)`;
};

const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1);

/** Every Home's writer as etcd has it, one range read: role -> host (absent: none). */
async function writers(): Promise<Map<string, string>> {
  const r = await etcd.etcdctl(['get', '--prefix', `${PREFIX}/homes/`]);
  if (r.code !== 0) throw new Error(`etcdctl get: ${r.stderr}`);
  const out = r.stdout.split('\n');
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < out.length; i += 2) {
    const m = new RegExp(`^${PREFIX}/homes/([^/]+)/writer$`).exec(out[i]!);
    if (m) map.set(m[1]!, (JSON.parse(out[i + 1]!) as { host: string }).host);
  }
  return map;
}

function countsOf(w: Map<string, string>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const host of w.values()) counts[host] = (counts[host] ?? 0) + 1;
  return counts;
}

const record = (host: string): HostRecord => ({ host, version: '', homes: 'all', started: '', pid: 0 });

/** Where rendezvous hashing puts each Home's writer among these hosts. */
function expected(names: string[], homes = roles): Map<string, string> {
  return new Map(homes.map((r) => [r, rankFor(r, names.map(record))[0]!]));
}

/**
 * Wait until every Home has a writer, each on the host ranked first for it, and that held for `quietMs`
 * (a settled spread, not one caught mid-move). The time it took, the last map and the moves seen on the way.
 */
async function settle(names: string[], ms: number, quietMs = 3000): Promise<{ s: number; w: Map<string, string>; changes: number }> {
  const started = performance.now();
  const want = expected(names);
  let last = '';
  let since = performance.now();
  let changes = 0;
  let w = new Map<string, string>();
  await poll(async () => {
    w = await writers();
    const key = roles.map((r) => w.get(r) ?? '-').join(',');
    if (key !== last) {
      last = key;
      since = performance.now();
      changes++;
    }
    const done = roles.every((r) => w.get(r) === want.get(r));
    return done && performance.now() - since >= quietMs;
  }, 'every Home\'s writer on the host ranked first for it', ms).catch((err) => {
    const off = roles.filter((r) => w.get(r) !== want.get(r));
    throw new Error(`${(err as Error).message}: writers ${JSON.stringify(countsOf(w))}, ${off.length} Homes elsewhere, e.g. ${off.slice(0, 5).map((r) => `${r}:${w.get(r) ?? 'none'}≠${want.get(r)}`).join(' ')}`);
  });
  return { s: (performance.now() - started) / 1000, w, changes };
}

/** Each host's count within its fair share ± 20%. */
function expectSpread(w: Map<string, string>, names: string[]): void {
  const counts = countsOf(w);
  const fair = w.size / names.length;
  expect(Object.keys(counts).sort()).toEqual([...names].sort());
  for (const name of names) {
    expect(counts[name]).toBeGreaterThanOrEqual(Math.floor(fair * 0.8));
    expect(counts[name]).toBeLessThanOrEqual(Math.ceil(fair * 1.2));
  }
}

/** The live writers: the hash's placement, Home by Home (settle() waited for it), and at the issue's size its ±20%. */
function expectPlaced(w: Map<string, string>, names: string[]): void {
  expect(countsOf(w)).toEqual(countsOf(expected(names)));
  if (HOMES >= ISSUE_HOMES) expectSpread(w, names);
}

describe(`writers spread over hosts (${HOMES} Homes, 3 hosts)`, () => {
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), `${DIR_PREFIX}spread-`));
    await fs.chmod(dir, 0o755);
    etcd = await startEtcd({ members: 1, dir: path.join(dir, 'etcd') });
    git = await startGitServer({ dir: path.join(dir, 'git') });
    // writer_ttl 10 s (nasd's default): a host CPU-starved for a few seconds keeps its lease. reconcile 5 m: each host
    // compares each Home it does not write with the git server that often (at 30 s, 3 hosts x 200 Homes would ask
    // the lab server 13 times a second, more than 2 cores serve: see the file's header).
    const override = {
      reconcile: '5m',
      git: { url: `http://127.0.0.1:${git.port}/{home}.git`, timeout: '60s' },
      etcd: { endpoints: etcd.endpoints, prefix: PREFIX, timeout_ms: 5000 },
    };
    for (const name of ['a', 'b', 'c']) hosts.push(new ClusterHost({ name, dir: path.join(dir, name), etcd, git, ttl: '10s', readyMs: LONG, override }));
    let t = performance.now();
    await mapLimit(roles, 4, (r) => git.createRepo(r));
    say(`${HOMES} empty repositories on the git server in ${seconds(t)} s`);
    // Host a's Homes, made as `nas home create` makes them (Home.create), before it starts.
    t = performance.now();
    const state = path.join(hosts[0]!.dir, 'state');
    await fs.mkdir(state, { recursive: true, mode: 0o700 });
    await mapLimit(roles, 4, (r) => Home.create(state, r, { owner: 'root', identity: { name: 'nasd', email: 'nasd@localhost' } }));
    say(`${HOMES} Homes made in host a's state directory in ${seconds(t)} s`);
  }, 120_000);

  afterAll(async () => {
    for (const h of hosts) await h.stop().catch(() => undefined);
    // NAS_SPREAD_LOGS=<dir>: each host's log kept there (the test's own dir goes).
    if (process.env.NAS_SPREAD_LOGS) for (const h of hosts) if (h.daemon) await fs.writeFile(path.join(process.env.NAS_SPREAD_LOGS, `${h.o.name}.log`), h.daemon.log);
    await git?.stop();
    await etcd?.stop();
    if (dir) await removeTree(dir);
    process.stdout.write(`\nwriters spread over hosts:\n${lines.map((l) => `  ${l}`).join('\n')}\n`);
  }, 120_000);

  it(`rendezvous hashing puts ${ISSUE_HOMES} Homes' writers on 3 hosts within ±20% each, and on the 2 left when one goes`, () => {
    const homes = Array.from({ length: ISSUE_HOMES }, (_, i) => `s${String(i).padStart(3, '0')}`);
    const three = expected(['a', 'b', 'c'], homes);
    const two = expected(['a', 'b'], homes);
    say(`rendezvous hashing, ${ISSUE_HOMES} Homes: on a, b, c ${JSON.stringify(countsOf(three))}; on a, b ${JSON.stringify(countsOf(two))}`);
    expectSpread(three, ['a', 'b', 'c']);
    expectSpread(two, ['a', 'b']);
    // c's going moves only c's Homes.
    expect([...three].filter(([r, h]) => h !== 'c' && two.get(r) !== h)).toEqual([]);
  });

  it('host a starts with the Homes, puts each on the git server and writes them all', async () => {
    const t = performance.now();
    const server0 = await cpu(git.pid);
    await hosts[0]!.start();
    const ready = seconds(t);
    const { s, w } = await settle(['a'], LONG, 0);
    say(`host a serving ${HOMES} Homes: ready in ${ready} s (each matched with its empty repository and put there), ` +
      `writer of all ${HOMES} ${s.toFixed(1)} s later; CPU ${await cpuText(hosts[0]!.pid)}, ` +
      `${((await cpu(git.pid)) - server0).toFixed(1)} s the git server`);
    expect(w.size).toBe(HOMES);
  }, LONG + 30_000);

  it(`b and c join: every Home has a writer, on the host ranked first for it`, async () => {
    const t = performance.now();
    const server0 = await cpu(git.pid);
    const etcd0 = await cpu(etcd.members[0]!.pid);
    const a0 = await cpu(hosts[0]!.pid);
    await Promise.all(hosts.slice(1).map(async (h) => {
      const t0 = performance.now();
      await h.start();
      say(`host ${h.o.name} ready in ${seconds(t0)} s (${HOMES} Homes fetched from the git server), CPU ${await cpuText(h.pid)}`);
    }));
    const { w, changes } = await settle(['a', 'b', 'c'], LONG);
    say(`b and c joined: writers ${JSON.stringify(countsOf(w))}, settled ${seconds(t)} s after they started (${changes} distinct writer maps seen); ` +
      `CPU since: a ${((await cpu(hosts[0]!.pid)) - a0).toFixed(1)} s, b ${(await cpu(hosts[1]!.pid)).toFixed(1)} s, c ${(await cpu(hosts[2]!.pid)).toFixed(1)} s, ` +
      `the git server ${((await cpu(git.pid)) - server0).toFixed(1)} s, etcd ${((await cpu(etcd.members[0]!.pid)) - etcd0).toFixed(1)} s`);
    expectPlaced(w, ['a', 'b', 'c']);
  }, 2 * LONG + 30_000);

  it('one host stopped: its Homes\' writers move to the other two, each to the host ranked first', async () => {
    const c = hosts[2]!;
    const moving = [...(await writers()).values()].filter((h) => h === 'c').length;
    const t = performance.now();
    await c.stop();
    const stopped = seconds(t);
    await poll(async () => {
      const w = await writers();
      return roles.every((r) => w.has(r) && w.get(r) !== 'c');
    }, 'a writer for every Home on a or b', LONG);
    const rewritten = seconds(t);
    const { w } = await settle(['a', 'b'], LONG);
    say(`host c stopped in ${stopped} s: its ${moving} Homes' writers moved, every Home had a writer on a or b ${rewritten} s after the stop began, ` +
      `each on the host ranked first ${(Number(seconds(t)) - 3).toFixed(1)} s after (writers ${JSON.stringify(countsOf(w))})`);
    expectPlaced(w, ['a', 'b']);
  }, LONG + 30_000);
});
