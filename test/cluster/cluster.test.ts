import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DIR_PREFIX, codeOf, eventually, removeTree, run } from '../helpers.js';
import { startEtcd, startGitServer, type EtcdCluster, type GitServer } from './harness.js';
import { ClusterHost, keepLogs, newWriter, percentile, writerInEtcd } from './hosts.js';
import { expectNothingLost, Ledger, settledWriter as settledWriterOf, writerHost as writerHostOf } from './tally.js';

/**
 * Several hosts serving one Home through a git server (git http-backend behind test/cluster/git-server.mjs) and a
 * three-member etcd, all on loopback: proposals from every host land on main once each, a merge shows through
 * every host's mount, and the writer's death at any point loses nothing. Each scenario prints a row of the
 * table (also written to a results file); what users check is asserted, times are printed, never asserted.
 */

let dir: string;
let etcd: EtcdCluster;
let git: GitServer;
let repo: string;
const hosts: ClusterHost[] = [];
const ledger = new Ledger(() => repo);
const proposeFrom = (h: ClusterHost) => ledger.proposeFrom(h);
const tally = (scenario: string, notes: string) => ledger.tally(scenario, notes);
const writerHost = () => writerHostOf(etcd, hosts);
const settledWriter = () => settledWriterOf(etcd, hosts);

describe('several hosts serving one Home (git server + etcd)', () => {
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), `${DIR_PREFIX}cluster-`));
    await fs.chmod(dir, 0o755);
    etcd = await startEtcd({ members: 3, dir: path.join(dir, 'etcd') });
    git = await startGitServer({ dir: path.join(dir, 'git') });
    repo = await git.createRepo('demo');
    for (const name of ['a', 'b', 'c']) {
      const h = new ClusterHost({ name, dir: path.join(dir, name), etcd, git, demo: name === 'a' });
      hosts.push(h);
      await h.start();
    }
  }, 180_000);

  afterAll(async () => {
    await keepLogs(hosts, 'agent-nas-cluster-logs');
    for (const h of hosts) await h.stop().catch(() => undefined);
    await git?.stop();
    await etcd?.stop();
    await ledger.print('cluster scenarios', 'agent-nas-cluster-results.md');
    if (dir) await removeTree(dir);
  }, 120_000);

  it('serves the Home from every host: the first put it on the git server, the others took it from there', async () => {
    for (const h of hosts) expect((await fs.readdir(h.mnt)).includes('demo')).toBe(true);
    type Status = { hosts: { host: string }[]; homes: { role: string; writer: string | null; current: boolean }[]; etcd: { ok: boolean } };
    // The last host to start may still be taking its lease, and the writer role settling on its host.
    const status = await eventually(async () => {
      const st = await hosts[1].nasJson<Status>('cluster', 'status');
      return st.hosts.length === 3 && st.homes.find((h) => h.role === 'demo')?.writer ? st : null;
    }, 'three hosts and a writer in nas cluster status', 20_000);
    expect(status.etcd.ok).toBe(true);
    expect(status.hosts.map((h) => h.host).sort()).toEqual(['a', 'b', 'c']);
    expect(status.homes.find((h) => h.role === 'demo')?.writer).toMatch(/^[abc]$/);
  });

  it('steady: proposals from every host each land on main once, and show through the other hosts\' mounts', async () => {
    const latencies: number[] = [];
    const queued: number[] = [];
    const seen: number[] = [];
    // Four rounds, each host proposing at once: at most 3 proposals in flight. Each merge is looked for through the
    // other hosts' mounts from before it is proposed, every 20 ms: how long after the writer published it it reads
    // there (one clock here).
    for (let round = 0; round < 4; round++) {
      const made = await Promise.all(hosts.map((h) => ledger.branch(h)));
      const appeared = made.flatMap((m, i) => hosts.filter((_, j) => j !== i).map(async (other) => {
        const file = path.join(other.mnt, 'demo/outbox/cluster', m.file);
        const until = Date.now() + 60_000;
        while (!(await fs.readFile(file, 'utf8').catch(() => null))) {
          if (Date.now() > until) throw new Error(`${m.file} never read through host ${other.o.name}'s mount`);
          await new Promise((r) => setTimeout(r, 20));
        }
        return { file: m.file, at: Date.now() };
      }));
      const results = await Promise.all(made.map((m, i) => ledger.propose(hosts[i]!, m)));
      for (const r of results) {
        expect(r.stderr).toBe('');
        expect(r.state).toBe('merged');
        latencies.push(r.ms);
        queued.push(r.waited!);
      }
      for (const a of await Promise.all(appeared)) seen.push(a.at - results.find((r) => r.file === a.file)!.published!);
    }
    // A burst: 20 branches made first, then proposed at once from all hosts; the writer merges them in batches. The
    // rate is proposals over the time from the first propose call to the last merge published (one clock here).
    const made = await Promise.all(Array.from({ length: 20 }, (_, i) => ledger.branch(hosts[i % 3])));
    const started = Date.now();
    const done = await Promise.all(made.map((m, i) => ledger.propose(hosts[i % 3], m)));
    expect(done.every((d) => d.ok && d.state === 'merged')).toBe(true);
    const rate = done.length / ((Math.max(...done.map((d) => d.published!)) - started) / 1000);
    const row = await tally('steady (3 hosts)', `queued to published p50 ${Math.round(percentile(queued, 50))} ms, p95 ${Math.round(percentile(queued, 95))} ms; ` +
      `nas propose p95 ${Math.round(percentile(latencies, 95))} ms; readable through the other hosts' mounts p50 ${Math.round(percentile(seen, 50))} ms, p95 ${Math.round(percentile(seen, 95))} ms after publishing; ` +
      `a burst of 20 proposals merged at ${rate.toFixed(1)} merges/s`);
    expectNothingLost(row);
    expect(row.onMain).toBe(ledger.acknowledged.length);
  }, 480_000);

  it('a branch name is one host\'s: a second host cannot make a branch of the same name', async () => {
    const [a, b] = hosts;
    await a.branchWith('named-once', 'outbox/cluster/named.txt', 'a\n');
    const taken = await b.nas('branch', 'create', 'demo/named-once');
    expect(taken.code).not.toBe(0);
    expect(taken.stderr).toContain('the branch name demo@named-once is taken by host a');
    // Once a's branch is discarded, the name is free again.
    expect((await a.nas('branch', 'discard', 'demo/named-once')).code).toBe(0);
    const made = await b.nas('branch', 'create', 'demo/named-once');
    expect(made.stderr).toBe('');
    expect((await b.nas('branch', 'discard', 'demo/named-once')).code).toBe(0);
  });

  it('a branch shows on the other hosts read-only at its pushed head; a write there is EROFS and nas why names the host', async () => {
    const [a, b] = hosts;
    const branch = `shown-${++ledger.seq}`;
    await a.branchWith(branch, 'outbox/wip.md', 'work in progress\n');
    const shown = path.join(b.mnt, `demo@${branch}`, 'outbox/wip.md');
    expect(await eventually(() => fs.readFile(shown, 'utf8').catch(() => null), `demo@${branch} on host b`, 20_000)).toBe('work in progress\n');
    expect(await codeOf(fs.writeFile(path.join(b.mnt, `demo@${branch}`, 'outbox/mine.md'), 'x'))).toBe('EROFS');
    const why = await b.nas('why', path.join(b.mnt, `demo@${branch}`, 'outbox/mine.md'));
    expect(why.stdout).toContain(`demo@${branch} is held by host a`);
    // Gone on a, gone on b.
    expect((await a.nas('branch', 'discard', `demo/${branch}`)).code).toBe(0);
    await eventually(async () => !(await fs.readdir(b.mnt)).includes(`demo@${branch}`), `demo@${branch} gone from host b`, 20_000);
  });

  it('nas branch move: the holder commits and hands the branch over; the new host writes in it and proposes it', async () => {
    const [a, b] = hosts;
    const branch = `moving-${++ledger.seq}`;
    await a.branchWith(branch, 'outbox/cluster/moved.txt', 'begun on a\n');
    // Written but not yet committed when the move is asked: the holder commits it first.
    await fs.writeFile(path.join(a.mnt, `demo@${branch}`, 'outbox/cluster/late.txt'), 'still pending on a\n');
    const moved = await b.nasJson<{ from: string; to: string }>('branch', 'move', `demo@${branch}`, '--to', 'b');
    expect(moved).toMatchObject({ from: 'a', to: 'b' });
    const here = path.join(b.mnt, `demo@${branch}`, 'outbox/cluster');
    expect(await fs.readFile(path.join(here, 'late.txt'), 'utf8')).toBe('still pending on a\n');
    await fs.writeFile(path.join(here, 'added-on-b.txt'), 'b\n');
    await b.daemon.sync(`demo/${branch}`);
    // On a it is no longer a's own (at most shown read-only, held by b).
    expect((await a.nasJson<{ name: string; host?: string }[]>('branch', 'list', 'demo')).some((x) => x.name === branch && x.host !== 'b')).toBe(false);
    const r = await b.nasJson<{ state: string; provenance: { proposal: string } }>('propose', `demo/${branch}`, '--intent', 'moved work');
    expect(r.state).toBe('merged');
    ledger.proposed++;
    ledger.acknowledged.push({ id: r.provenance.proposal, files: ['moved.txt', 'late.txt', 'added-on-b.txt'] });
  });

  it('a branch moved by force while its host was away: back, that host lets its copy go and keeps what it never pushed as <branch>-left-<host>', async () => {
    const writer = await writerHost();
    const [holder, taker] = hosts.filter((h) => h !== writer);
    const branch = `forced-${++ledger.seq}`;
    const ref = `refs/nas/hosts/${holder.o.name}/heads/${branch}`;
    const onServer = async (file: string) => (await run('git', ['--git-dir', repo, 'cat-file', '-e', `${ref}:outbox/cluster/${file}`])).code === 0;
    await holder.branchWith(branch, 'outbox/cluster/pushed.txt', 'pushed before\n');
    await eventually(() => onServer('pushed.txt'), `${branch} pushed by host ${holder.o.name}`, 20_000);
    // Written and committed last, then the holder paused before its next push (the reconcile's, every 3 s).
    await fs.writeFile(path.join(holder.mnt, `demo@${branch}`, 'outbox/cluster/unpushed.txt'), 'written last on the holder\n');
    await holder.daemon.sync(`demo/${branch}`);
    process.kill(holder.pid, 'SIGSTOP');
    let pushedAnyway: boolean;
    try {
      pushedAnyway = await onServer('unpushed.txt');
      const alive = async () => (await etcd.etcdctl(['get', `/agent-nas-test/hosts/${holder.o.name}`, '--print-value-only'])).stdout.trim() !== '';
      await eventually(async () => !(await alive()), `host ${holder.o.name}'s lease to lapse`, 20_000);
      const moved = await taker.nasJson<{ from: string; to: string }>('branch', 'move', `demo@${branch}`, '--to', taker.o.name, '--force');
      expect(moved).toMatchObject({ from: holder.o.name, to: taker.o.name });
    } finally {
      process.kill(holder.pid, 'SIGCONT');
    }
    // The taker has it at the head the holder last pushed.
    expect(await fs.readFile(path.join(taker.mnt, `demo@${branch}`, 'outbox/cluster/pushed.txt'), 'utf8')).toBe('pushed before\n');
    // Back, the holder's copy goes: the branch shows there read-only, held by the taker; nothing written there is lost.
    const kept = `${branch}-left-${holder.o.name}`;
    await eventually(async () => {
      const list = await holder.nasJson<{ name: string; host?: string }[]>('branch', 'list', 'demo');
      return list.some((x) => x.name === branch && x.host === taker.o.name) && (pushedAnyway || list.some((x) => x.name === kept && !x.host));
    }, `${branch} held by ${taker.o.name} as host ${holder.o.name} sees it`, 30_000);
    expect(await codeOf(fs.writeFile(path.join(holder.mnt, `demo@${branch}`, 'outbox/late.txt'), 'x'))).toBe('EROFS');
    const survivor = pushedAnyway! ? path.join(taker.mnt, `demo@${branch}`) : path.join(holder.mnt, `demo@${kept}`);
    expect(await fs.readFile(path.join(survivor, 'outbox/cluster/unpushed.txt'), 'utf8')).toBe('written last on the holder\n');
    expect((await taker.nas('branch', 'discard', `demo/${branch}`)).code).toBe(0);
    if (!pushedAnyway!) expect((await holder.nas('branch', 'discard', `demo/${kept}`)).code).toBe(0);
  });

  it('the Human Gate on any host: a PR that waits is approved on another host than the writer and merges', async () => {
    const writer = await settledWriter();
    const [proposer, approver] = hosts.filter((h) => h !== writer);
    // A deletion waits for a person.
    if (ledger.acknowledged.length === 0) expect((await proposeFrom(proposer)).state).toBe('merged');
    const branch = `gate-${++ledger.seq}`;
    expect((await proposer.nas('branch', 'create', `demo/${branch}`)).code).toBe(0);
    const victim = ledger.acknowledged[0].files[0];
    await fs.rm(path.join(proposer.mnt, `demo@${branch}`, 'outbox/cluster', victim));
    await proposer.daemon.sync(`demo/${branch}`);
    const waiting = await proposer.nasJson<{ id: number; state: string }>('propose', `demo/${branch}`, '--intent', 'remove one file');
    expect(waiting.state).toBe('waiting');
    // Every host lists it (the PR records follow main from the git server).
    await eventually(async () => (await approver.nasJson<{ id: number; state: string }[]>('pr', 'list', 'demo')).some((p) => p.id === waiting.id && p.state === 'waiting'), 'the waiting PR on the approving host');
    const approved = await approver.nasJson<{ state: string }>('pr', 'approve', 'demo', String(waiting.id));
    expect(approved.state).toBe('merged');
    await eventually(async () => !(await fs.readdir(path.join(writer.mnt, 'demo/outbox/cluster'))).includes(victim), `${victim} gone from main on the writer host`);
    ledger.acknowledged.splice(0, 1);
  });

  it('operators move a writer, drain a host and verify main against the queue', async () => {
    const writer = await settledWriter();
    const other = hosts.find((h) => h !== writer)!;
    const moved = await writer.nasJson<{ writer: string; preferred: string }>('cluster', 'writer', 'demo', '--move-to', other.o.name);
    expect(moved).toMatchObject({ writer: other.o.name, preferred: other.o.name });
    // Draining the preferred host hands the role on; joining brings it back (the preference stands).
    const drained = await other.nasJson<{ released: string[]; held: string[] }>('cluster', 'leave', '--drain');
    expect(drained).toMatchObject({ released: ['demo'], held: [] });
    await eventually(async () => ((await writerInEtcd(etcd)) ?? other.o.name) !== other.o.name, 'the role on another host');
    expect((await other.proposeBranch(`drained-${++ledger.seq}`)).state).toBe('merged');
    expect((await other.nas('cluster', 'join')).code).toBe(0);
    await eventually(async () => (await writerInEtcd(etcd)) === other.o.name, 'the role back on the preferred host', 20_000);
    expect((await writer.nas('cluster', 'writer', 'demo', '--move-to', 'any')).code).toBe(0);
    const verified = await hosts[2].nas('cluster', 'verify', 'demo');
    expect(verified.stdout).toContain('merged twice: none');
    expect(verified.stdout).toContain('git fsck: clean');
    expect(verified.code).toBe(0);
  });

  for (const point of ['after-merge', 'after-push', 'after-publish']) {
    it(`the writer killed ${point}: another host takes over and every proposal lands once`, async () => {
      const writer = await settledWriter();
      await writer.stop();
      await writer.start({ crashAt: point });
      // The role comes back to the host ranked first for it, which may be this one again.
      const crashing = await settledWriter();
      if (crashing !== writer) {
        await crashing.stop();
        await crashing.start({ crashAt: point });
        await settledWriter();
      }
      const target = await writerHost();
      // The proposer is not armed to crash (the first host armed may have let the role go before it merged).
      const from = hosts.find((h) => h !== target && !h.o.crashAt) ?? hosts.find((h) => h !== target)!;
      const r = await proposeFrom(from);
      await eventually(async () => !target.alive(), `host ${target.o.name} to die ${point}`);
      // The proposal waited in the queue (or was answered from main) and the proposer had its answer.
      expect(r.stderr).toBe('');
      expect(r.state).toBe('merged');
      const took = await newWriter(etcd, target.o.name).catch(() => ({ host: '?', ms: -1 }));
      await target.kill();
      // Every host armed here starts again unarmed, so a later scenario's writer does not crash by surprise.
      for (const h of hosts.filter((x) => x.o.crashAt)) {
        if (h.alive()) await h.stop();
        await h.start({ crashAt: '' });
      }
      const row = await tally(`writer SIGKILL ${point}`, `answered in ${Math.round(r.ms)} ms; new writer ${took.host} ${took.ms} ms after the death was seen (TTL 2 s)`);
      expectNothingLost(row);
    });
  }

  it('a paused writer (SIGSTOP past its TTL, then SIGCONT) loses its role and pushes nothing stale', async () => {
    const writer = await settledWriter();
    process.kill(writer.pid, 'SIGSTOP');
    try {
      const took = await newWriter(etcd, writer.o.name);
      const from = hosts.find((h) => h !== writer)!;
      const r = await proposeFrom(from);
      expect(r.state).toBe('merged');
      process.kill(writer.pid, 'SIGCONT');
      // Back, it learns it lost and follows main; a proposal from it lands through the new writer.
      const back = await proposeFrom(writer);
      expect(back.state).toBe('merged');
      const row = await tally('writer paused past TTL', `new writer ${took.host} ${took.ms} ms after SIGSTOP`);
      expectNothingLost(row);
    } finally {
      process.kill(writer.pid, 'SIGCONT');
    }
  });

  it('an etcd member lost (the leader killed): proposals go on', async () => {
    const leader = await etcd.leader();
    await etcd.kill(leader, 'SIGKILL');
    try {
      const results = await Promise.all(hosts.map((h) => proposeFrom(h)));
      for (const r of results) expect(r.state).toBe('merged');
    } finally {
      await etcd.restart(leader);
    }
    const row = await tally('etcd leader killed', `member m${leader} down during 3 proposals`);
    expectNothingLost(row);
  });

  it('the git server down for 10 s: a proposal is refused with why and nothing half-done; after it returns, it merges', async () => {
    const h = hosts[1];
    await h.branchWith(`down-${++ledger.seq}`, 'outbox/cluster/during-down.txt', 'made while the git server was down\n');
    await git.stop();
    const started = performance.now();
    let refused;
    try {
      refused = await h.nas('propose', `demo/down-${ledger.seq}`, '--intent', 'while the git server is down');
    } finally {
      await new Promise((r) => setTimeout(r, Math.max(0, 10_000 - (performance.now() - started))));
      await git.restart();
    }
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/cannot push demo@down-\d+ to the git server, so nothing was proposed/);
    // Nothing was queued for it.
    expect((await etcd.etcdctl(['get', '--prefix', '/agent-nas-test/homes/demo/queue/', '--keys-only'])).stdout.trim()).toBe('');
    const again = await h.nas('--json', 'propose', `demo/down-${ledger.seq}`, '--intent', 'after the git server came back');
    expect(again.stderr).toBe('');
    ledger.proposed++;
    ledger.acknowledged.push({ id: JSON.parse(again.stdout).provenance.proposal, files: ['during-down.txt'] });
    const row = await tally('git server down 10 s', 'the proposal during the outage was refused (not acknowledged); the same branch merged after');
    expectNothingLost(row);
  });
});
