import type { Logger } from 'pino';
import type { Watcher } from 'etcd3';
import { MAIN_REF, PRS_REF } from '../store/refs.js';
import { Store, type ServerRepo } from '../store/store.js';
import { UserError } from '../util/errors.js';
import { repoUrl, type ClusterConfig } from './config.js';
import type { ClusterEtcd } from './etcd.js';
import { Membership, preferWriter, rankFor } from './hosts.js';
import { accessOf, announce, seedHome, type SeedOutcome } from './seed.js';
import { mapLimit } from '../util/concurrency.js';
import { MainFollower } from './follower.js';
import { MergeWriter, type Decision, type Filer } from './writer.js';
import type { Shipped } from './objects.js';
import { parsed, type Proposal, type ProposalResult } from './proposal.js';
import { clusterMeter } from './cluster-meter.js';
import { clusterStatus, type ClusterStatus } from './status.js';
import { BranchNames } from './branch-names.js';
import { verifyHome, type VerifyReport } from './verify.js';
import { BranchSync, localBranches, type ElsewhereBranch } from './branch-sync.js';
import { Asking } from './asking.js';
import { BranchMoves, type BranchHost } from './branch-move.js';
import { Outbox } from './outbox.js';
import { joinCluster, SERVER_CALLS } from './joining.js';

/**
 * This host's part in a cluster (nasd.yaml `cluster:`): every Home it serves is also in a repository on the git
 * server, the truth; etcd elects one merge writer per Home among the hosts serving it (writer.ts) and carries
 * the proposals to it; every other host follows main from the server, at once on etcd's "main moved" and by a
 * slow reconcile whatever etcd says.
 */

/** What the cluster needs of the Homes this host has open. */
export interface ClusterHomes {
  roles(): string[];
  storeOf(role: string): Store | null;
  /** main moved in a Store: the mount follows. */
  refreshMains(): Promise<void>;
  /** Open (mount) a Home whose Store was just made from the git server. */
  open(role: string): Promise<void>;
  /** Show the branches other hosts hold, read-only at their last pushed heads. */
  showElsewhere(role: string, branches: ElsewhereBranch[]): Promise<void>;
}

export class Cluster {
  private homes!: ClusterHomes;
  private filer!: Filer;
  private readonly writers = new Map<string, MergeWriter>();
  private readonly campaigning = new Set<string>();
  private watcher: Watcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private slowTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Where an operator asked each Home's writer to be (`homes/<role>/prefer`), as the watch keeps it. */
  private readonly preferred = new Map<string, string>();
  readonly started = new Date().toISOString();
  readonly branchNames: BranchNames;
  private readonly asking: Asking;
  private readonly moves: BranchMoves;
  private readonly follower: MainFollower;
  private readonly outbox: Outbox;
  private branches!: BranchSync;

  private constructor(
    readonly config: ClusterConfig,
    readonly etcd: ClusterEtcd,
    readonly membership: Membership,
    private readonly log: Logger,
    readonly version: string,
    readonly seeded: Map<string, SeedOutcome>,
    private readonly stateDir: string,
  ) {
    this.branchNames = new BranchNames(etcd, config.host, log);
    this.outbox = new Outbox(`${stateDir}/cluster/outbox`, log);
    this.asking = new Asking(etcd, config.host, (role, main) => this.follow(role, main), this.outbox);
    this.follower = new MainFollower({
      storeOf: (role) => this.homes.storeOf(role), writing: (role) => this.writers.has(role), server: (role) => this.server(role),
      refreshMains: () => this.homes.refreshMains(), log,
    });
    this.moves = new BranchMoves(etcd, config.host, this.branchNames, this.asking, () => membership.live(), (role) => this.server(role),
      (role, fn) => this.pushing(role, fn), log);
    for (const [role, outcome] of seeded) if (outcome !== 'waiting') this.compared.set(role, performance.now());
  }

  /**
   * Before the Homes open: reach etcd and the git server, match every Home with its repository and take this
   * host's name (joining.ts). Any of these failing stops nasd with what to fix.
   */
  static async join(config: ClusterConfig, stateDir: string, log: Logger, version: string): Promise<Cluster> {
    const { etcd, membership, seeded } = await joinCluster(config, stateDir, log, version);
    return new Cluster(config, etcd, membership, log, version, seeded, stateDir);
  }

  /** Start serving: follow main, stand for writer of every Home, answer what etcd says. */
  async attach(homes: ClusterHomes, filer: Filer, branchHost: BranchHost): Promise<void> {
    this.homes = homes;
    this.filer = filer;
    this.moves.host = branchHost;
    this.branches = new BranchSync(this.config.host, this.config.push, (role, branches) => homes.showElsewhere(role, branches), this.log, this.asking.pushed);
    await this.membership.join();
    this.membership.onLost = () => {
      for (const w of this.writers.values()) w.stop();
    };
    this.membership.onRejoined = () => void this.tick();
    for (const p of await this.etcd.list<{ host: string }>('homes/')) {
      if (p.key.endsWith('/prefer')) this.preferred.set(p.key.split('/')[1], p.value.host);
    }
    this.watcher = await this.etcd.watch('');
    this.watcher.on('put', (kv) => this.onEvent('put', kv.key.toString(), kv.value.toString()));
    this.watcher.on('delete', (kv) => this.onEvent('delete', kv.key.toString(), ''));
    // A watch that reconnects may have missed events: reconcile at once.
    this.watcher.on('connected', () => void this.reconcile());
    this.watcher.on('error', (err) => this.log.warn({ err: err.message }, 'cluster: the etcd watch failed; it reconnects'));
    // From now on this host campaigns on a writer's departure: the others may hand it the roles it ranks first for.
    await this.membership.serving(true);
    this.timer = setInterval(() => void this.tick(), (1000 * this.config.writer_ttl_s) / 4);
    this.slowTimer = setInterval(() => void this.reconcile(), this.config.reconcile_s * 1000);
    this.timer.unref();
    this.slowTimer.unref();
    await this.reconcile();
  }

  /** The Homes this host should serve: the configured ones, or with "all" every Home here and every one etcd knows. */
  private async wanted(): Promise<string[]> {
    if (this.config.homes !== 'all') return this.config.homes;
    const known = (await this.etcd.kv.getAll().prefix('homes/').keys()).filter((k) => k.endsWith('/main')).map((k) => k.split('/')[1]);
    return [...new Set([...this.homes.roles(), ...known])].sort();
  }

  /**
   * Match a Home with its repository on the server (seed.ts); one this host put there first is announced, so
   * hosts serving "all" learn of it.
   */
  async seed(role: string): Promise<SeedOutcome> {
    try {
      const outcome = await seedHome(this.config, this.stateDir, role, this.log);
      if (outcome === 'seeded') {
        await announce(this.etcd, this.config.host, this.stateDir, role);
        this.log.info({ role }, 'cluster: this host put the Home on the git server');
      }
      return outcome;
    } catch (err) {
      // Before attach() nasd stops on this (the demo Home at start): its name goes now, not after the TTL.
      if (!this.homes) await this.close();
      throw err;
    }
  }

  private served(): string[] {
    return this.homes.roles().filter((r) => this.config.homes === 'all' || this.config.homes.includes(r));
  }

  private server(role: string): ServerRepo {
    const store = this.homes.storeOf(role);
    if (!store) throw new UserError(`Home ${role} is not served by this host`, 404);
    return store.server(repoUrl(this.config, role), accessOf(this.config));
  }

  /** This host's pushes of its own branches to a Home's repository, one at a time (two force pushes of one ref race). */
  private readonly pushes = new Map<string, Promise<unknown>>();
  private pushing<T>(role: string, fn: () => Promise<T>): Promise<T> {
    const next = (this.pushes.get(role) ?? Promise.resolve()).then(fn, fn);
    this.pushes.set(role, next.catch(() => undefined));
    return next;
  }

  isWriter(role: string): boolean {
    return this.writers.has(role);
  }

  private onEvent(kind: 'put' | 'delete', key: string, value: string): void {
    const [top, role, what, id] = key.split('/');
    if (top === 'hosts') return void this.rebalance().catch(() => undefined);
    if (top !== 'homes' || !role) return;
    this.log.debug({ key, kind }, 'cluster: etcd event');
    if (what === 'main' && kind === 'put' && !this.writers.has(role)) {
      // A value that does not read: the reconcile compares with the server.
      const moved = parsed<{ commit: string; records?: string; objects?: Shipped }>(value);
      if (moved?.commit) void this.follow(role, moved.commit, moved.records, moved.objects);
    } else if (what === 'writer' && kind === 'delete') void this.campaign(role);
    else if (what === 'prefer') {
      const host = kind === 'put' ? parsed<{ host: string }>(value)?.host : undefined;
      if (host) this.preferred.set(role, host);
      else this.preferred.delete(role);
      void this.rebalance();
    } else if ((what === 'queue' || what === 'decisions') && kind === 'put') {
      const writer = this.writers.get(role);
      if (writer) writer.poke(what === 'queue' ? parsed<Proposal>(value) : undefined);
    } else if (what === 'moves' && kind === 'put') {
      void this.moves.onEvent(role, value);
    } else if (what === 'results' && kind === 'put' && id) {
      this.asking.answered(role, id, value);
    }
  }

  /**
   * The fast pass, every quarter TTL, from etcd alone (one keys-only read): a writer stood for where a Home has
   * none (a watch whose etcd member was cut off with the writer's host misses the key's deletion in silence),
   * writers moved to where rendezvous hashing puts them, what waits in the outbox queued, the queue depth.
   */
  private ticking = false;
  async tick(): Promise<void> {
    if (this.ticking || this.closed) return;
    this.ticking = true;
    try {
      const started = performance.now();
      const keys = await this.etcd.kv.getAll().prefix('homes/').keys();
      clusterMeter.etcd((performance.now() - started) / 1000);
      const written = new Set<string>();
      const queued = new Map<string, number>();
      for (const key of keys) {
        const [, role, what] = key.split('/');
        if (what === 'writer') written.add(role);
        else if (what === 'queue') queued.set(role, (queued.get(role) ?? 0) + 1);
      }
      for (const role of this.served()) {
        clusterMeter.queue(role, queued.get(role) ?? 0);
        if (!written.has(role) && this.membership.fresh()) await this.campaign(role);
      }
      await this.outbox.send(this.etcd);
      await this.rebalance();
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cluster: etcd pass failed; the next one retries');
    } finally {
      this.ticking = false;
    }
  }

  /**
   * The slow pass (every `reconcile`, and after a watch reconnects), against the git server whatever etcd said:
   * Homes put there by other hosts are taken, main is compared and followed, and branches are exchanged
   * (branch-sync.ts: this host's pushed, the others' shown read-only). With etcd out of reach, main still follows.
   */
  private reconciling = false;
  /** When each Home's main was last compared with the server's (at start, by the match with its repository). */
  private readonly compared = new Map<string, number>();
  async reconcile(): Promise<void> {
    if (this.reconciling || this.closed) return;
    this.reconciling = true;
    try {
      const due = performance.now() - this.config.reconcile_s * 1000;
      const etcdUp = await this.etcd.ping().then(() => true, (err: Error) => {
        this.log.warn({ err: err.message }, 'cluster: etcd is out of reach; main follows the git server meanwhile');
        return false;
      });
      await mapLimit(etcdUp ? await this.wanted() : this.served(), SERVER_CALLS, async (role) => {
        try {
          // Matched with its repository at start a moment ago: not asked again in the first pass.
          const fresh = (this.compared.get(role) ?? -Infinity) > due;
          this.compared.delete(role);
          if (!this.homes.storeOf(role)) {
            // A Home another host put on the server since this one started.
            if (!fresh && etcdUp && (await this.seed(role)) === 'fetched') await this.opening(role);
            return;
          }
          if (fresh) return;
          const refs = await this.server(role).refs();
          const theirs = refs.get(MAIN_REF);
          if (!theirs) {
            if (etcdUp) await this.seed(role);
          } else if (!this.writers.has(role)) await this.follow(role, theirs, refs.get(PRS_REF) ?? null);
          const pushed = (branch: string) => refs.get(`refs/nas/hosts/${this.config.host}/heads/${branch}`);
          if (etcdUp) await this.moves.reclaim(role, [...(await localBranches(this.homes.storeOf(role)!)).keys()], pushed);
          await this.pushing(role, () => this.branches.sync(role, this.homes.storeOf(role)!, this.server(role), refs));
          // A role etcd says is this host's with no writer here (its release failed) is given back (campaign).
          if (!this.writers.has(role) && etcdUp) await this.campaign(role);
        } catch (err) {
          this.log.warn({ role, err: (err as Error).message }, 'cluster: reconcile of the Home failed; the next pass retries');
        }
      });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cluster: reconcile pass failed; the next one retries');
    } finally {
      this.reconciling = false;
    }
    await this.tick();
  }

  /** Homes fetched by the reconcile open one at a time. */
  private opened: Promise<void> = Promise.resolve();
  private opening(role: string): Promise<void> {
    const next = this.opened.then(() => this.homes.open(role));
    this.opened = next.catch(() => undefined);
    return next;
  }

  /** This host's main and PR records made the server's (follower.ts); never a writer's own. */
  follow(role: string, commit?: string, records?: string | null, objects?: Shipped): Promise<void> {
    return this.follower.follow(role, commit, records, objects);
  }

  /**
   * Stand for writer of a Home that has none. The host rendezvous hashing ranks first stands at once, the
   * others after a wait by rank, so writers spread and a dead host's Homes still find one.
   */
  private async campaign(role: string): Promise<void> {
    if (this.closed || this.writers.has(role) || this.campaigning.has(role) || !this.served().includes(role)) return;
    if (!this.membership.fresh() || this.membership.draining) return;
    this.campaigning.add(role);
    try {
      const key = `homes/${role}/writer`;
      const held = await this.etcd.json<{ host: string }>(key);
      if (held) {
        // This host's role with no writer here (its release failed, etcd unreachable then): given back now.
        if (held.value.host === this.config.host && !this.writers.has(role)) await this.etcd.kv.if(key, 'Create', '==', held.create).then(this.etcd.kv.delete().key(key)).commit();
        return;
      }
      // Ranked among the hosts serving (one still opening its Homes, or stopping, takes no role now).
      const serving = await this.membership.servingHosts();
      const found = rankFor(role, serving, this.preferred.get(role)).indexOf(this.config.host);
      const rank = found < 0 ? serving.length : found;
      if (rank > 0) {
        await new Promise((r) => setTimeout(r, rank * 500));
        if (await this.etcd.json(key)) return;
      }
      const previous = await this.etcd.json<{ host: string }>(`homes/${role}/main`);
      const res = await this.etcd.kv.if(key, 'Create', '==', 0)
        .then(this.etcd.kv.put(key).value(JSON.stringify({ host: this.config.host, at: new Date().toISOString() })).lease(this.membership.id))
        .commit();
      if (!res.succeeded) return;
      const epoch = String(res.header.revision);
      if (previous && previous.value.host !== this.config.host) clusterMeter.failover(role);
      this.log.info({ role, epoch }, 'cluster: this host is the merge writer of the Home');
      clusterMeter.writer(role, true);
      const store = this.homes.storeOf(role)!;
      const writer = new MergeWriter(role, epoch, store, this.server(role), this.etcd, this.membership, this.filer, this.config.batch, this.log,
        (why) => this.writerEnded(role, writer, why), () => void this.homes.refreshMains());
      this.writers.set(role, writer);
    } catch (err) {
      this.log.warn({ role, err: (err as Error).message }, 'cluster: standing for writer failed; the reconcile retries');
    } finally {
      this.campaigning.delete(role);
    }
  }

  private writerEnded(role: string, writer: MergeWriter, why: string): void {
    if (this.writers.get(role) !== writer) return;
    this.writers.delete(role);
    clusterMeter.writer(role, false);
    this.log.info({ role, why }, 'cluster: this host is no longer the merge writer of the Home');
    // Give the role back (if it is still held), and take the server's main: what this writer merged and did not
    // push is still queued for the next writer.
    const key = `homes/${role}/writer`;
    void this.etcd.kv.if(key, 'Create', '==', writer.epoch).then(this.etcd.kv.delete().key(key)).commit()
      .catch(() => undefined)
      .then(() => this.follow(role));
  }

  /**
   * Writers move to the host rendezvous hashing ranks first once it has served 2 s (as this host saw it come: the
   * hosts' clocks may differ; looked at again then), between batches; all of them when this host drains.
   */
  private settling: NodeJS.Timeout | null = null;
  /** Writers told to stop for another host (a writer ends its batch first): told once. */
  private readonly handed = new WeakSet<MergeWriter>();
  private async rebalance(): Promise<void> {
    if (this.closed) return;
    const serving = await this.membership.servingHosts();
    const servedFor = this.membership.servingFor(serving);
    let soonest = Infinity;
    await mapLimit([...this.writers], SERVER_CALLS, async ([role, writer]) => {
      const first = rankFor(role, serving, this.preferred.get(role))[0];
      if (!this.membership.draining) {
        if (!first || first === this.config.host) return;
        const wait = 2000 - (servedFor.get(first) ?? 0);
        if (wait > 0) return void (soonest = Math.min(soonest, wait));
        if ((await this.etcd.count(`homes/${role}/queue/`)) > 0) return;
      }
      if (this.handed.has(writer)) return;
      this.handed.add(writer);
      this.log.info({ role, to: first ?? null }, 'cluster: handing the Home\'s writer role to the host ranked first for it');
      writer.stop();
    });
    if (soonest < Infinity && !this.settling) {
      this.settling = setTimeout(() => {
        this.settling = null;
        void this.rebalance().catch(() => undefined); // the tick tries again
      }, soonest + 100);
      this.settling.unref();
    }
  }

  /** Propose a branch's head through the Home's writer, wherever it runs (asking.ts). */
  propose(role: string, p: Omit<Proposal, 'id' | 'host' | 'at' | 'role'>): Promise<ProposalResult> {
    return this.asking.propose(role, this.server(role), p, (fn) => this.pushing(role, fn), this.homes.storeOf(role));
  }

  /** `nas branch move`: the branch goes to another host (branch-move.ts). */
  moveBranch(role: string, branch: string, to: string, force: boolean): Promise<{ branch: string; from: string; to: string; head: string }> {
    return this.moves.move(role, branch, to, force);
  }

  /** A person's decision on a PR, carried out by the Home's writer (it alone writes main and the records). */
  decide(role: string, d: Omit<Decision, 'id' | 'host' | 'at'>): Promise<ProposalResult> {
    return this.asking.decide(role, d);
  }

  /**
   * `nas cluster leave --drain`: stand for no writer role and hand over the ones held (each after its batch);
   * the Homes stay served here. The Homes whose role went elsewhere are returned.
   */
  async drain(): Promise<{ host: string; released: string[]; held: string[] }> {
    await this.membership.update({ draining: true });
    const released = [...this.writers.keys()];
    await this.rebalance();
    await Promise.all([...this.writers.values()].map((w) => w.done));
    return { host: this.config.host, released, held: [...this.writers.keys()] };
  }

  /** `nas cluster join`: stand for writer again after a drain. */
  async undrain(): Promise<{ host: string }> {
    await this.membership.update({ draining: false });
    void this.tick();
    return { host: this.config.host };
  }

  /**
   * `nas cluster writer <home> --move-to <host>`: the Home's writer goes to that host (a live one serving it) at
   * its next idle moment, and stays there while it is up; `any` gives the choice back to rendezvous hashing.
   */
  moveWriter(role: string, to: string): Promise<{ home: string; writer: string | null; preferred: string | null }> {
    return preferWriter(this.etcd, this.membership, role, to);
  }

  /** `nas cluster verify`: this host's copy brought up to the server's first (a writer's is the server's). */
  async verify(role: string): Promise<VerifyReport> {
    const store = this.homes.storeOf(role);
    if (!store) throw new UserError(`Home ${role} is not served by this host`, 404);
    await this.follow(role);
    return verifyHome(role, this.server(role), () => store.readRef(MAIN_REF), this.etcd);
  }

  async status(): Promise<ClusterStatus> {
    return clusterStatus(this, this.served(), (role) => this.homes.storeOf(role));
  }

  async close(): Promise<void> {
    // First the record: the others stop handing roles to this host before it lets its own go.
    if (!this.closed && this.homes) await this.membership.serving(false).catch(() => undefined);
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.slowTimer) clearInterval(this.slowTimer);
    if (this.settling) clearTimeout(this.settling);
    const writers = [...this.writers.values()];
    for (const w of writers) w.stop();
    await Promise.all(writers.map((w) => w.done));
    await this.watcher?.cancel().catch(() => undefined);
    await this.membership.leave();
    this.etcd.close();
  }
}
