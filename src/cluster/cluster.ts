import type { Logger } from 'pino';
import type { Watcher } from 'etcd3';
import { MAIN_REF, PRS_REF } from '../store/refs.js';
import { Store, type ServerRepo } from '../store/store.js';
import { Home } from '../home/home.js';
import { UserError } from '../util/errors.js';
import { repoUrl, type ClusterConfig } from './config.js';
import { ClusterEtcd } from './etcd.js';
import { Membership, rankFor, type HostRecord } from './hosts.js';
import { accessOf, seedHome, servedHomes, type SeedOutcome } from './seed.js';
import { MergeWriter, type Decision, type Filer } from './writer.js';
import { hostBranchRef, proposalId, shippedReads, type Proposal, type ProposalResult } from './proposal.js';
import { clusterMeter } from './cluster-meter.js';
import { clusterStatus, type ClusterStatus } from './status.js';
import { Outbox } from './outbox.js';

/**
 * This host's part in a cluster (nasd.yaml `cluster:`): every Home it serves is also in a repository on the git
 * server, the truth; etcd elects one merge writer per Home among the hosts serving it (writer.ts) and carries
 * the proposals to it; every other host follows main from the server, at once on etcd's "main moved" and by a
 * slow reconcile whatever etcd says.
 */

function parsed<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

/** What the cluster needs of the Homes this host has open. */
export interface ClusterHomes {
  roles(): string[];
  storeOf(role: string): Store | null;
  /** main moved in a Store: the mount follows. */
  refreshMains(): Promise<void>;
  /** Open (mount) a Home whose Store was just made from the git server. */
  open(role: string): Promise<void>;
}

/** How long a proposal or a decision waits for the writer's answer before the caller is told it is queued. */
const ANSWER_WAIT_MS = 60_000;

export class Cluster {
  private homes!: ClusterHomes;
  private filer!: Filer;
  private readonly writers = new Map<string, MergeWriter>();
  private readonly campaigning = new Set<string>();
  private readonly waiters = new Map<string, (r: ProposalResult) => void>();
  private readonly following = new Map<string, Promise<void>>();
  private watcher: Watcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private vacancyTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** When this host's main of each Home last differed from the published one (its lag). */
  private readonly behindSince = new Map<string, number>();
  readonly started = new Date().toISOString();
  private readonly outbox: Outbox;
  /** When this host first saw each live host (by its own clock: a record's `started` is by the other host's). */
  private readonly seen = new Map<string, number>();

  private constructor(
    readonly config: ClusterConfig,
    readonly etcd: ClusterEtcd,
    readonly membership: Membership,
    private readonly log: Logger,
    readonly version: string,
    readonly seeded: Map<string, SeedOutcome>,
    private readonly stateDir: string,
  ) {
    this.outbox = new Outbox(`${stateDir}/cluster/outbox`, log);
  }

  /**
   * Before the Homes open: reach etcd and the git server, match every Home with its repository (seed.ts) and
   * take this host's name. Any of these failing stops nasd with what to fix.
   */
  static async join(config: ClusterConfig, stateDir: string, log: Logger, version: string): Promise<Cluster> {
    const etcd = await ClusterEtcd.connect(config.etcd);
    try {
      await etcd.ping();
    } catch (err) {
      etcd.close();
      throw new UserError(`cluster: cannot reach etcd at ${config.etcd.endpoints.join(', ')} within ${config.etcd.timeout_ms} ms (${(err as Error).message}): ` +
        'check cluster.etcd.endpoints, the TLS files and that etcd runs');
    }
    try {
      const roles = new Set(await servedHomes(config, stateDir));
      if (config.homes === 'all') for (const key of await etcd.kv.getAll().prefix('homes/').keys()) if (key.endsWith('/main')) roles.add(key.split('/')[1]);
      const seeded = new Map<string, SeedOutcome>();
      for (const role of [...roles].sort()) seeded.set(role, await seedHome(config, stateDir, role, log));
      const me: HostRecord = { host: config.host, version, homes: config.homes, started: new Date().toISOString(), pid: process.pid };
      const membership = new Membership(etcd, me, config.writer_ttl_s, log);
      await membership.join();
      log.info({ host: config.host, homes: Object.fromEntries(seeded) }, 'cluster: joined');
      return new Cluster(config, etcd, membership, log, version, seeded, stateDir);
    } catch (err) {
      etcd.close();
      throw err;
    }
  }

  /** Start serving: follow main, stand for writer of every Home, answer what etcd says. */
  async attach(homes: ClusterHomes, filer: Filer): Promise<void> {
    this.homes = homes;
    this.filer = filer;
    this.membership.onLost = () => {
      for (const w of this.writers.values()) w.stop();
    };
    this.membership.onRejoined = () => void this.reconcile();
    this.watcher = await this.etcd.watch('');
    this.watcher.on('put', (kv) => this.onEvent('put', kv.key.toString(), kv.value.toString()));
    this.watcher.on('delete', (kv) => this.onEvent('delete', kv.key.toString(), ''));
    // A watch that reconnects may have missed events: reconcile at once.
    this.watcher.on('connected', () => void this.reconcile());
    this.watcher.on('error', (err) => this.log.warn({ err: err.message }, 'cluster: the etcd watch failed; it reconnects'));
    this.timer = setInterval(() => void this.reconcile(), Math.min(this.config.reconcile_s * 1000, 1000 * this.config.writer_ttl_s));
    this.timer.unref();
    this.vacancyTimer = setInterval(() => void this.vacancies(), 250 * this.config.writer_ttl_s);
    this.vacancyTimer.unref();
    await this.reconcile();
  }

  /**
   * Stand at once for the Homes whose writer key is gone, every quarter TTL: a watch whose etcd member was cut
   * off along with the writer's host misses the key's deletion in silence, and the reconcile comes later.
   */
  private looking = false;
  private async vacancies(): Promise<void> {
    if (this.looking || this.closed || !this.membership.fresh()) return;
    this.looking = true;
    try {
      const keys = new Set(await this.etcd.kv.getAll().prefix('homes/').keys());
      for (const role of this.served()) if (!keys.has(`homes/${role}/writer`)) void this.campaign(role);
    } catch {
      // etcd out of reach: the reconcile says so
    } finally {
      this.looking = false;
    }
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
    const outcome = await seedHome(this.config, this.stateDir, role, this.log);
    if (outcome === 'seeded') {
      const key = `homes/${role}/main`;
      const commit = await (await Store.open(Home.dirFor(this.stateDir, role))).readRef(MAIN_REF);
      await this.etcd.kv.if(key, 'Create', '==', 0).then(this.etcd.kv.put(key).value(JSON.stringify({ commit, epoch: '0', host: this.config.host, at: new Date().toISOString() }))).commit();
      this.log.info({ role }, 'cluster: this host put the Home on the git server');
    }
    return outcome;
  }

  private served(): string[] {
    return this.homes.roles().filter((r) => this.config.homes === 'all' || this.config.homes.includes(r));
  }

  private server(role: string): ServerRepo {
    const store = this.homes.storeOf(role);
    if (!store) throw new UserError(`Home ${role} is not served by this host`, 404);
    return store.server(repoUrl(this.config, role), accessOf(this.config));
  }

  isWriter(role: string): boolean {
    return this.writers.has(role);
  }

  private onEvent(kind: 'put' | 'delete', key: string, value: string): void {
    const [top, role, what, id] = key.split('/');
    if (top === 'hosts') return void this.rebalance();
    if (top !== 'homes' || !role) return;
    this.log.debug({ key, kind }, 'cluster: etcd event');
    if (what === 'main' && kind === 'put' && !this.writers.has(role)) {
      // A value that does not read: the reconcile compares with the server.
      const commit = parsed<{ commit: string }>(value)?.commit;
      if (commit) void this.follow(role, commit);
    } else if (what === 'writer' && kind === 'delete') void this.campaign(role);
    else if ((what === 'queue' || what === 'decisions') && kind === 'put') {
      const writer = this.writers.get(role);
      if (writer) writer.poke(what === 'queue' ? parsed<Proposal>(value) : undefined);
    }
    else if (what === 'results' && kind === 'put' && id) {
      if (this.outbox.sent.delete(id)) void this.answeredLater(role, id, parsed<ProposalResult>(value));
      const result = this.waiters.has(id) ? parsed<ProposalResult>(value) : undefined;
      if (result) this.waiters.get(id)!(result);
    }
  }

  /** A proposal sent from the outbox was answered: no one waits for it here, so its result goes, and main follows. */
  private async answeredLater(role: string, id: string, r: ProposalResult | undefined): Promise<void> {
    this.log.info({ role, proposal: id, pr: r?.pr ?? null, state: r?.state ?? null, error: r?.error ?? null }, 'cluster: a proposal made while etcd was out of reach was answered');
    await this.etcd.kv.delete().key(`homes/${role}/results/${id}`).catch(() => undefined);
    if (r?.main) await this.follow(role, r.main);
  }

  /**
   * The slow pass (and after every watch reconnect): main compared with the server's, a writer for every Home
   * that has none, what waits in the outbox queued, and writers moved to where rendezvous hashing puts them.
   * With etcd out of reach, main still follows the server's.
   */
  private reconciling = false;
  async reconcile(): Promise<void> {
    if (this.reconciling || this.closed) return;
    this.reconciling = true;
    try {
      const etcdUp = await this.etcd.ping().then((s) => (clusterMeter.etcd(s), true), (err: Error) => {
        this.log.warn({ err: err.message }, 'cluster: etcd is out of reach; main follows the git server meanwhile');
        return false;
      });
      for (const role of etcdUp ? await this.wanted() : this.served()) {
        try {
          if (!this.homes.storeOf(role)) {
            // A Home another host put on the server since this one started.
            if (etcdUp && (await this.seed(role)) === 'fetched') await this.homes.open(role);
            continue;
          }
          if (!this.writers.has(role)) {
            const theirs = (await this.server(role).refs(MAIN_REF)).get(MAIN_REF);
            if (theirs) await this.follow(role, theirs);
            else if (etcdUp) await this.seed(role);
            if (etcdUp) await this.campaign(role);
          }
          if (!etcdUp) continue;
          await this.outbox.send(role, this.etcd);
          clusterMeter.queue(role, await this.etcd.count(`homes/${role}/queue/`));
        } catch (err) {
          this.log.warn({ role, err: (err as Error).message }, 'cluster: reconcile of the Home failed; the next pass retries');
        }
      }
      if (etcdUp) await this.rebalance();
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cluster: reconcile pass failed; the next one retries');
    } finally {
      this.reconciling = false;
    }
  }

  /**
   * Make this host's main (and PR records) the server's: fetched, and the mount told. One fetch at a time per
   * Home; a writer's own Store is never overwritten (it is what the server gets next).
   */
  follow(role: string, commit?: string): Promise<void> {
    const store = this.homes.storeOf(role);
    if (!store || this.writers.has(role)) return Promise.resolve();
    const prior = this.following.get(role) ?? Promise.resolve();
    const next = prior.then(async () => {
      if (this.writers.has(role)) return;
      const ours = await store.readRef(MAIN_REF);
      if (commit && ours === commit) return this.current(role);
      if (!this.behindSince.has(role)) this.behindSince.set(role, performance.now());
      const t0 = performance.now();
      await this.server(role).fetchMain(MAIN_REF, PRS_REF);
      const t1 = performance.now();
      if ((await store.readRef(MAIN_REF)) !== ours) await this.homes.refreshMains();
      this.log.debug({ role, fetch_ms: Math.round(t1 - t0), refresh_ms: Math.round(performance.now() - t1) }, 'cluster: followed main');
      this.current(role);
    }).catch((err) => this.log.warn({ role, err: (err as Error).message }, 'cluster: cannot follow main from the git server; the reconcile retries'));
    this.following.set(role, next);
    return next;
  }

  private current(role: string): void {
    const since = this.behindSince.get(role);
    clusterMeter.lag(role, since === undefined ? 0 : (performance.now() - since) / 1000);
    this.behindSince.delete(role);
  }

  /**
   * Stand for writer of a Home that has none. The host rendezvous hashing ranks first stands at once, the
   * others after a wait by rank, so writers spread and a dead host's Homes still find one.
   */
  private async campaign(role: string): Promise<void> {
    if (this.closed || this.writers.has(role) || this.campaigning.has(role) || !this.served().includes(role)) return;
    if (!this.membership.fresh()) return;
    this.campaigning.add(role);
    try {
      const key = `homes/${role}/writer`;
      if (await this.etcd.json(key)) return;
      const rank = rankFor(role, (await this.membership.live()).values()).indexOf(this.config.host);
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
   * Writers move to the host rendezvous hashing ranks first once it has been up a while (as this host saw it
   * come: the hosts' clocks may differ), between batches.
   */
  private async rebalance(): Promise<void> {
    if (this.closed) return;
    const live = await this.membership.live();
    const who = (h: HostRecord) => `${h.host} ${h.pid} ${h.started}`;
    const now = new Set([...live.values()].map(who));
    for (const h of now) if (!this.seen.has(h)) this.seen.set(h, performance.now());
    for (const h of this.seen.keys()) if (!now.has(h)) this.seen.delete(h);
    for (const [role, writer] of this.writers) {
      const first = rankFor(role, live.values())[0];
      const since = first ? this.seen.get(who(live.get(first)!)) : undefined;
      if (first && first !== this.config.host && since !== undefined && performance.now() - since > 2000) {
        if ((await this.etcd.count(`homes/${role}/queue/`)) > 0) continue;
        this.log.info({ role, to: first }, 'cluster: handing the Home\'s writer role to the host ranked first for it');
        writer.stop();
      }
    }
  }

  /**
   * Propose a branch's head: pushed to this host's prefix on the git server, queued in etcd, and answered by
   * the writer (wherever it is) with the PR it filed. Acknowledged once queued: a writer that dies after that
   * leaves it queued for the next.
   */
  async propose(role: string, p: Omit<Proposal, 'id' | 'host' | 'at' | 'role'>): Promise<ProposalResult> {
    const server = this.server(role);
    try {
      await server.push([{ from: p.head, to: hostBranchRef(this.config.host, p.branch), expected: 'any' }]);
    } catch (err) {
      throw new UserError(`cannot push ${role}@${p.branch} to the git server, so nothing was proposed: ${(err as Error).message}`, 502);
    }
    const proposal: Proposal = { ...p, id: proposalId(this.config.host), host: this.config.host, role, at: new Date().toISOString(), reads: shippedReads(p.reads) };
    return this.ask(role, `queue/${proposal.id}`, proposal.id, proposal, true);
  }

  /** A person's decision on a PR, carried out by the Home's writer (it alone writes main and the records). */
  async decide(role: string, d: Omit<Decision, 'id' | 'host' | 'at'>): Promise<ProposalResult> {
    const decision: Decision = { ...d, id: proposalId(this.config.host), host: this.config.host, at: new Date().toISOString() };
    return this.ask(role, `decisions/${decision.id}`, decision.id, decision);
  }

  /** keep: a proposal, kept in the outbox when etcd cannot be reached (its head is on the git server already). */
  private async ask(role: string, key: string, id: string, value: object, keep = false): Promise<ProposalResult> {
    const answered = new Promise<ProposalResult>((resolve) => this.waiters.set(id, resolve));
    try {
      try {
        await this.etcd.kv.put(`homes/${role}/${key}`).value(JSON.stringify(value));
      } catch (err) {
        if (!keep) throw new UserError(`cannot reach etcd, so nothing was queued (${(err as Error).message}): try again`, 503);
        await this.outbox.keep(value as Proposal);
        throw new UserError(`queued on this host as ${id}: etcd cannot be reached (${(err as Error).message}); the proposal goes to ` +
          `Home ${role}'s merge writer once it can, and the PR shows in nas pr list then. Nothing is lost`, 202);
      }
      const queued = performance.now();
      const deadline = Date.now() + ANSWER_WAIT_MS;
      let result: ProposalResult | null = null;
      while (!result && Date.now() < deadline) {
        // The watch answers at once; the read is for an event the watch missed (a reconnect).
        result = await Promise.race([answered, new Promise<null>((r) => setTimeout(() => r(null), 2000))]);
        result ??= (await this.etcd.json<ProposalResult>(`homes/${role}/results/${id}`).catch(() => null))?.value ?? null;
      }
      if (!result) {
        throw new UserError(`queued as ${id}, but Home ${role}'s merge writer has not answered within ${ANSWER_WAIT_MS / 1000} s: ` +
          'it is taken when a writer is elected; nothing is lost (see nas cluster status)', 504);
      }
      result.waited_ms = Math.round(performance.now() - queued);
      await this.etcd.kv.delete().key(`homes/${role}/results/${id}`).catch(() => undefined);
      if (result.main) await this.follow(role, result.main);
      return result;
    } finally {
      this.waiters.delete(id);
    }
  }

  async status(): Promise<ClusterStatus> {
    return clusterStatus(this, this.served(), (role) => this.homes.storeOf(role));
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.vacancyTimer) clearInterval(this.vacancyTimer);
    const writers = [...this.writers.values()];
    for (const w of writers) w.stop();
    await Promise.all(writers.map((w) => w.done));
    await this.watcher?.cancel().catch(() => undefined);
    await this.membership.leave();
    this.etcd.close();
  }
}
