import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DIR_PREFIX, removeTree } from '../helpers.js';
import { freePorts, startGitServer, type GitServer } from '../cluster/harness.js';
import { filesOnMain, proposalsOnMain } from '../cluster/hosts.js';
import { Container } from './container.js';

/**
 * The cluster as an operator sets it up: three Debian containers (a, b, c; container.ts) booted once for the file,
 * sharing this machine's network so that everything talks over 127.0.0.1 on ports of its own. In each, Debian's
 * etcd.service runs one member of a three-member etcd (configured through /etc/default/etcd, as the README says),
 * and nasd.service with nas-mount-broker.service serves the Homes with a `cluster:` block in
 * /etc/agent-nas/nasd.yaml. The git server runs here (test/cluster/git-server.mjs). What is asserted is what an
 * operator checks with real commands inside the containers; times are printed, never asserted. The tests build
 * on each other; the containers are stopped by systemd-nspawn's pid after the last one, also when one fails.
 */

const NAMES = ['a', 'b', 'c'] as const;
const UNITS = '/opt/agent-nas/systemd';
const FOLDER = 'outbox/sd';

interface Host { name: string; c: Container; client: string; peer: string }
interface Status {
  host: string;
  etcd: { ok: boolean };
  hosts: { host: string }[];
  homes: { role: string; writer: string | null; current: boolean }[];
}

let dir: string;
let git: GitServer;
let repo: string;
const hosts: Host[] = [];
const booting: Promise<unknown>[] = [];
/** Every proposal acknowledged (nas propose answered with its PR): its id and the file it added under FOLDER. */
const acknowledged: { id: string; file: string }[] = [];
let proposed = 0;
let seq = 0;
/** What the suite measured, printed as it goes and again at the end. */
const numbers: string[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const note = (line: string) => {
  numbers.push(line);
  console.log(`systemd cluster: ${line}`);
};
const since = (t: number) => `${Math.round(performance.now() - t)} ms`;

/** Poll (every 250 ms: each check is a command in a container) until check gives a value; throws naming what. */
async function until<T>(what: string, check: () => Promise<T | null | undefined | false>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
    await sleep(250);
  }
}

const host = (name: string) => hosts.find((h) => h.name === name)!;
const status = async (h: Host) => JSON.parse(await h.c.ok('nas cluster status --json')) as Status;
const writerIn = (s: Status) => s.homes.find((x) => x.role === 'demo')?.writer ?? null;
const mainPid = async (h: Host) => Number((await h.c.ok('systemctl show -p MainPID --value nasd')).trim());

/** Wait until every host in `on` lists `count` hosts and names the same writer for demo, for 4 s running. */
async function settledWriter(on: Host[], count: number, ms = 45_000): Promise<Host> {
  let last = '';
  let from = performance.now();
  await until(`${on.map((h) => h.name).join(', ')} to list ${count} hosts and agree on demo's writer`, async () => {
    const all = await Promise.all(on.map(status));
    const names = new Set(all.map(writerIn));
    const w = names.size === 1 && all.every((s) => s.hosts.length === count) ? [...names][0] ?? '' : '';
    if (w !== last) [last, from] = [w, performance.now()];
    return w && performance.now() - from > 4000;
  }, ms);
  return host(last);
}

/** A new branch on a host with one new file under outbox/sd/, written through its mount. */
async function branch(h: Host): Promise<{ h: Host; branch: string; file: string; n: number }> {
  const n = ++seq;
  const made = { h, branch: `sd${n}-${h.name}`, file: `f${n}.txt`, n };
  await h.c.ok(`nas branch create demo/${made.branch} && mkdir -p /agents/demo@${made.branch}/${FOLDER} &&
    echo 'proposal ${n} from ${h.name}' >/agents/demo@${made.branch}/${FOLDER}/${made.file}`);
  return made;
}

/** nas propose of a branch made by branch(): the PR's state; an acknowledgement is counted. */
async function propose(made: Awaited<ReturnType<typeof branch>>): Promise<{ state: string; ms: number }> {
  proposed++;
  const t = performance.now();
  const out = await made.h.c.ok(`nas --json propose demo/${made.branch} --intent 'systemd suite proposal ${made.n}'`);
  const ms = performance.now() - t;
  const pr = JSON.parse(out) as { state: string; provenance: { proposal: string } };
  acknowledged.push({ id: pr.provenance.proposal, file: made.file });
  return { state: pr.state, ms };
}

/** Wait until a file of main reads through a host's mount; how long it took. */
async function readsOn(h: Host, file: string, ms = 30_000): Promise<string> {
  const t = performance.now();
  await until(`${file} through /agents/demo on host ${h.name}`, async () => (await h.c.sh(`cat /agents/demo/${FOLDER}/${file}`)).code === 0, ms);
  return since(t);
}

describe('three hosts under systemd: etcd.service and nasd.service with a cluster: block (systemd-nspawn)', () => {
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), `${DIR_PREFIX}sd-cluster-`));
    await fs.chmod(dir, 0o755);
    git = await startGitServer({ dir: path.join(dir, 'git') });
    repo = await git.createRepo('demo');
    const ports = await freePorts(2 * NAMES.length);
    const t = performance.now();
    // All three at once (the root is built first, once, under its lock); each that boots is stopped in afterAll.
    const boots = NAMES.map(async (name, i) => {
      const c = await Container.boot({ name, network: 'host', files: { '/etc/hostname': `${name}\n` } });
      hosts.push({ name, c, client: `http://127.0.0.1:${ports[2 * i]}`, peer: `http://127.0.0.1:${ports[2 * i + 1]}` });
    });
    booting.push(...boots);
    const failed = (await Promise.allSettled(boots)).find((r) => r.status === 'rejected');
    if (failed) {
      console.error(String((failed as PromiseRejectedResult).reason?.message).split('\n')[0]);
      throw (failed as PromiseRejectedResult).reason;
    }
    hosts.sort((x, y) => x.name.localeCompare(y.name));
    note(`three containers booted in ${since(t)}`);
  }, 900_000);

  afterAll(async () => {
    await Promise.allSettled(booting);
    await Promise.allSettled(hosts.map((h) => h.c.stop()));
    await git?.stop();
    if (dir) await removeTree(dir);
    console.log(`\nsystemd cluster, what was measured:\n${numbers.map((l) => `  ${l}`).join('\n')}\n`);
  }, 120_000);

  // What went wrong, where: each host's last lines of nasd and etcd after a failed test.
  afterEach(async ({ task }) => {
    if (task.result?.state !== 'fail') return;
    for (const h of hosts) {
      const log = await h.c.sh("journalctl -u nasd -u etcd -o short-monotonic --no-pager | grep -v 'lease not found' | tail -60");
      console.error(`--- host ${h.name}:\n${log.stdout}${log.stderr}`);
    }
  }, 30_000);

  it('etcd.service on each host, configured through /etc/default/etcd: three members, healthy', async () => {
    const token = `nas-sd-${randomBytes(4).toString('hex')}`;
    const initial = hosts.map((h) => `${h.name}=${h.peer}`).join(',');
    const t = performance.now();
    for (const h of hosts) {
      // The README's lines (each member's own name and address), here all on 127.0.0.1 with ports of their own.
      const lines = [`ETCD_NAME=${h.name}`, `ETCD_LISTEN_PEER_URLS=${h.peer}`, `ETCD_INITIAL_ADVERTISE_PEER_URLS=${h.peer}`,
        `ETCD_LISTEN_CLIENT_URLS=${h.client}`, `ETCD_ADVERTISE_CLIENT_URLS=${h.client}`, `ETCD_INITIAL_CLUSTER=${initial}`,
        `ETCD_INITIAL_CLUSTER_TOKEN=${token}`];
      await h.c.ok(`printf '%s\\n' ${lines.join(' ')} >>/etc/default/etcd && systemctl enable -q etcd && systemctl start --no-block etcd`);
    }
    const endpoints = hosts.map((h) => h.client).join(',');
    await until('etcd endpoint health --cluster', async () => (await hosts[0].c.sh(`etcdctl --endpoints=${endpoints} endpoint health --cluster`)).code === 0);
    note(`etcd healthy on three members ${since(t)} after the first systemctl start`);
    for (const h of hosts) {
      await until(`etcd.service active on ${h.name}`, async () => (await h.c.sh('systemctl is-active etcd')).stdout === 'active\n');
      const members = await h.c.ok(`etcdctl --endpoints=${h.client} member list`);
      expect(members.trim().split('\n').map((l) => l.split(', ')[2]).sort()).toEqual(['a', 'b', 'c']);
    }
  }, 120_000);

  it('systemctl enable --now nasd on each host returns with the mount serving; nas cluster status lists 3 hosts and one writer', async () => {
    const endpoints = hosts.map((h) => h.client);
    for (const h of hosts) {
      const cluster = {
        host: h.name, git: { url: git.url('{home}'), timeout: '10s' }, etcd: { endpoints, timeout_ms: 1500 },
        writer_ttl: '3s', reconcile: '3s', push: 'commit', homes: 'all',
      };
      // Host a makes the demo Home and puts it on the git server; b and c fetch it. The web page's port would be
      // the same on all three (one network): off.
      await h.c.write('/etc/agent-nas/nasd.yaml', `${h.name === 'a' ? 'demo: true\n' : ''}web_listen: "off"\ncluster: ${JSON.stringify(cluster)}\n`);
      const t = performance.now();
      // The README's commands; no drop-in: etcd and the git server are on loopback, which nasd.service allows.
      const out = await h.c.ok(`cp ${UNITS}/nasd.service ${UNITS}/nas-mount-broker.service /etc/systemd/system/ && systemctl enable -q --now nasd &&
        findmnt -n -o FSTYPE /agents && cat /agents/demo/AGENTS.md >/dev/null && echo served`);
      expect(out).toBe('fuse.nasd\nserved\n');
      note(`host ${h.name}: systemctl enable --now nasd returned, serving, in ${since(t)}`);
      // The journal says where the Home came from: made on a (then put on the git server), fetched on b and c.
      const log = await h.c.ok('journalctl -u nasd -o cat --no-pager');
      expect(log).toContain(h.name === 'a' ? '"msg":"created the demo Home"' : '"homes":{"demo":"fetched"},"msg":"cluster: joined"');
    }
    const t = performance.now();
    const writer = await settledWriter(hosts, 3);
    note(`demo's writer settled on ${writer.name} ${since(t)} after the last host was ready`);
    for (const h of hosts) {
      const s = await status(h);
      expect(s.host).toBe(h.name);
      expect(s.etcd.ok).toBe(true);
      expect(s.hosts.map((x) => x.host).sort()).toEqual(['a', 'b', 'c']);
      expect(writerIn(s)).toBe(writer.name);
    }
    expect(await writer.c.ok(`etcdctl --endpoints=${writer.client} get /agent-nas/homes/demo/writer --print-value-only`)).toContain(`"host":"${writer.name}"`);
  }, 180_000);

  it('a branch made and proposed on one host merges; its file reads through /agents/demo on the other two', async () => {
    const writer = await settledWriter(hosts, 3);
    // From a host that is not the writer: the proposal goes through etcd's queue.
    const from = hosts.find((h) => h !== writer)!;
    const made = await branch(from);
    const r = await propose(made);
    expect(r.state).toBe('merged');
    const seen = await Promise.all(hosts.filter((h) => h !== from).map(async (h) => `${h.name} after ${await readsOn(h, made.file)}`));
    note(`proposal from ${from.name} (writer ${writer.name}) merged, nas propose took ${Math.round(r.ms)} ms; read through the other mounts: ${seen.join(', ')}`);
    expect(await from.c.ok(`cat /agents/demo/${FOLDER}/${made.file}`)).toBe(`proposal ${made.n} from ${from.name}\n`);
  }, 120_000);

  it('systemctl stop nasd on the writer\'s host: another host becomes writer and a proposal merges; systemctl start: it rejoins', async () => {
    const writer = await settledWriter(hosts, 3);
    const rest = hosts.filter((h) => h !== writer);
    const made = await branch(rest[1]);
    let t = performance.now();
    await writer.c.ok('systemctl stop nasd');
    note(`host ${writer.name} (writer): systemctl stop nasd took ${since(t)}`);
    expect((await writer.c.sh('findmnt -R /agents')).stdout).toBe('');
    // A clean stop: the unit is inactive, not failed.
    expect(await writer.c.ok('systemctl show -p Result --value nasd')).toBe('success\n');
    const next = await until('another writer in nas cluster status', async () => {
      const s = await status(rest[0]);
      const w = writerIn(s);
      return s.hosts.length === 2 && w && w !== writer.name ? w : null;
    });
    expect(rest.map((h) => h.name)).toContain(next);
    note(`writer ${next} took over ${since(t)} after systemctl stop began on ${writer.name}`);
    const r = await propose(made);
    expect(r.state).toBe('merged');
    note(`a proposal from ${made.h.name} with ${writer.name} stopped merged in ${Math.round(r.ms)} ms; on ${rest[0].name} after ${await readsOn(rest[0], made.file)}`);

    t = performance.now();
    await writer.c.ok('systemctl start nasd');
    note(`host ${writer.name}: systemctl start nasd returned, serving, in ${since(t)}`);
    await settledWriter(hosts, 3);
    note(`host ${writer.name} rejoined: three hosts and one writer again ${since(t)} after systemctl start`);
    // Its main followed the server's: the merge made while it was down reads through its mount.
    expect(await writer.c.ok(`cat /agents/demo/${FOLDER}/${made.file}`)).toBe(`proposal ${made.n} from ${made.h.name}\n`);
  }, 180_000);

  it('systemctl kill -s KILL nasd on the writer: Restart= brings it back, and nothing proposed is lost', async () => {
    const writer = await settledWriter(hosts, 3);
    const rest = hosts.filter((h) => h !== writer);
    const made = await Promise.all(rest.map(branch));
    const before = await mainPid(writer);
    const t = performance.now();
    await writer.c.ok('systemctl kill -s KILL nasd');
    // Proposed from the other two the moment the writer is gone: they wait in the queue for the next writer.
    const results = await Promise.all(made.map(propose));
    for (const r of results) expect(r.state).toBe('merged');
    note(`two proposals made as the writer ${writer.name} was killed merged in ${results.map((r) => `${Math.round(r.ms)} ms`).join(' and ')}`);
    const after = await until(`nasd back on ${writer.name} under a new pid`, async () => {
      if ((await writer.c.sh('systemctl is-active -q nasd')).code !== 0) return null;
      const pid = await mainPid(writer);
      return pid && pid !== before ? pid : null;
    }, 60_000);
    note(`host ${writer.name}: nasd active again (pid ${before} -> ${after}) ${since(t)} after the kill`);
    expect(await writer.c.ok('journalctl -u nasd -o cat --no-pager')).toContain('Scheduled restart job');
    // Restart= brought back the killed nasd only: no other host's nasd failed meanwhile.
    for (const h of hosts) expect(await h.c.ok('systemctl show -p NRestarts --value nasd'), `restarts on ${h.name}`).toBe(h === writer ? '1\n' : '0\n');
    await settledWriter(hosts, 3);
    note(`three hosts and one writer again ${since(t)} after the kill`);
    // Back, it proposes too.
    const back = await propose(await branch(writer));
    expect(back.state).toBe('merged');

    // Nothing lost: every acknowledged proposal merged once on the git server's main, its file there and through
    // every host's mount; nas cluster verify agrees.
    expect(acknowledged.length).toBe(proposed);
    const onMain = await proposalsOnMain(repo);
    const files = await filesOnMain(repo, FOLDER);
    for (const a of acknowledged) {
      expect(onMain.filter((id) => id === a.id).length, `proposal ${a.id} on main once`).toBe(1);
      expect(files).toContain(a.file);
    }
    for (const h of hosts) {
      for (const a of acknowledged) await readsOn(h, a.file);
      const verified = await h.c.sh('nas cluster verify demo');
      expect(verified.stdout).toContain('merged twice: none');
      expect(verified.stdout).toContain('git fsck: clean');
      expect(verified.code).toBe(0);
    }
    note(`${proposed} proposed, ${acknowledged.length} acknowledged, all on main once and read through the three mounts; nas cluster verify demo: ok on every host`);
  }, 240_000);
});
