import type { Logger } from 'pino';
import type { Watcher } from 'etcd3';
import { MAIN_REF, PRS_REF } from '../store/refs.js';
import { Store, type ServerRepo } from '../store/store.js';
import { Home } from '../home/home.js';
import { UserError } from '../util/errors.js';
import { checkClusterFiles, repoUrl, type ClusterConfig } from './config.js';
import { ClusterEtcd } from './etcd.js';
import { Membership, rankFor, type HostRecord } from './hosts.js';
import { accessOf, putOnServer, seedHome, servedHomes, type SeedOutcome } from './seed.js';
import { mapLimit } from '../util/concurrency.js';
import { MergeWriter, type Decision, type Filer } from './writer.js';
import { hostBranchRef, proposalId, shippedReads, type Proposal, type ProposalResult } from './proposal.js';
import { clusterMeter } from './cluster-meter.js';
import { clusterStatus, type ClusterStatus } from './status.js';

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

/** Calls to the git server (ls-remote, fetch, push) at once when every Home is matched at start or compared by the reconcile. */
const SERVER_CALLS = 8;

/** A Home this host matched with the server: its main announced unless etcd knows it, so hosts serving "all" learn of it. */
async function announce(etcd: ClusterEtcd, host: string, stateDir: string, role: string): Promise<void> {
  const key = `homes/${role}/main`;
  const commit = await (await Store.open(Home.dirFor(stateDir, role))).readRef(MAIN_REF);
  await etcd.kv.if(key, 'Create', '==', 0).then(etcd.kv.put(key).value(JSON.stringify({ commit, epoch: '0', host, at: new Date().toISOString() }))).commit();
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
  private closed = false;
  /** When this host's main of each Home last differed from the published one (its lag). */
  private readonly behindSince = new Map<string, number>();
  readonly started = new Date().toISOString();

  private constructor(
    readonly config: ClusterConfig,
    readonly etcd: ClusterEtcd,
    readonly membership: Membership,
    private readonly log: Logger,
    readonly version: string,
    readonly seeded: Map<string, SeedOutcome>,
    private readonly stateDir: string,
  ) {
    for (const [role, outcome] of seeded) if (outcome !== 'waiting') this.compared.set(role, performance.now());
  }

  /**
   * Before the Homes open: reach etcd and the git server, match every Home with its repository (seed.ts) and
   * take this host's name. Any of these failing stops nasd with what to fix.
   */
  static async join(config: ClusterConfig, stateDir: string, log: Logger, version: string): Promise<Cluster> {
    await checkClusterFiles(config);
    const etcd = await ClusterEtcd.connect(config.etcd);
    try {
      await etcd.ping();
    } catch (err) {
      etcd.close();
      throw new UserError(`cluster: cannot reach etcd at ${config.etcd.endpoints.join(', ')} within ${config.etcd.timeout_ms} ms (${(err as Error).message}): ` +
        'check cluster.etcd.endpoints, the TLS files and that etcd runs');
    }
    let membership: Membership | null = null;
    try {
      const roles = new Set(await servedHomes(config, stateDir));
      if (config.homes === 'all') for (const key of await etcd.kv.getAll().prefix('homes/').keys()) if (key.endsWith('/main')) roles.add(key.split('/')[1]);
      // Every Home matched with its repository first, a few at a time, nothing pushed: one refused, nothing was written.
      const sorted = [...roles].sort();
      const outcomes = await mapLimit(sorted, SERVER_CALLS, (role) => seedHome(config, stateDir, role, log, true));
      const seeded = new Map(sorted.map((role, i) => [role, outcomes[i]!]));
      const me: HostRecord = { host: config.host, version, homes: config.homes, started: new Date().toISOString(), pid: process.pid };
      membership = new Membership(etcd, me, config.writer_ttl_s, log);
      await membership.join();
      // Then the Homes only this host had go to the server; each is announced, so hosts serving "all" learn of it.
      await mapLimit(sorted, SERVER_CALLS, async (role) => {
        if (seeded.get(role) === 'empty') seeded.set(role, await putOnServer(config, stateDir, role, log));
        if (seeded.get(role) !== 'waiting') await announce(etcd, config.host, stateDir, role);
      });
      log.info({ host: config.host, homes: Object.fromEntries(seeded) }, 'cluster: joined');
      return new Cluster(config, etcd, membership, log, version, seeded, stateDir);
    } catch (err) {
      await membership?.leave();
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
    // From now on this host campaigns on a writer's departure: the others may hand it the roles it ranks first for.
    await this.membership.serving(true);
    this.timer = setInterval(() => void this.reconcile(), Math.min(this.config.reconcile_s * 1000, 1000 * this.config.writer_ttl_s));
    this.timer.unref();
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

  isWriter(role: string): boolean {
    return this.writers.has(role);
  }

  private onEvent(kind: 'put' | 'delete', key: string, value: string): void {
    const [top, role, what, id] = key.split('/');
    if (top === 'hosts') return void this.rebalance().catch(() => undefined);
    if (top !== 'homes' || !role) return;
    this.log.debug({ key, kind }, 'cluster: etcd event');
    if (what === 'main' && kind === 'put' && !this.homes.storeOf(role)) this.compared.delete(role);
    else if (what === 'main' && kind === 'put' && !this.writers.has(role)) {
      // A value that does not read: the reconcile compares with the server.
      const commit = parsed<{ commit: string }>(value)?.commit;
      if (commit) void this.follow(role, commit);
    } else if (what === 'writer' && kind === 'delete') void this.campaign(role);
    else if ((what === 'queue' || what === 'decisions') && kind === 'put') {
      const writer = this.writers.get(role);
      if (writer) writer.poke(what === 'queue' ? parsed<Proposal>(value) : undefined);
    }
    else if (what === 'results' && kind === 'put' && id) {
      const result = this.waiters.has(id) ? parsed<ProposalResult>(value) : undefined;
      if (result) this.waiters.get(id)!(result);
    }
  }

  /**
   * The slow pass (and after every watch reconnect): main compared with the server's, a writer for every Home
   * that has none, and writers moved to where rendezvous hashing puts them.
   */
  private reconciling = false;
  /** When each Home's main was last compared with the server's (at start, by the match with its repository). */
  private readonly compared = new Map<string, number>();
  async reconcile(): Promise<void> {
    if (this.reconciling || this.closed) return;
    this.reconciling = true;
    try {
      clusterMeter.etcd(await this.etcd.ping());
      // Each tick stands for writer of the Homes that have none; the server is asked once per `reconcile` a Home.
      const due = performance.now() - this.config.reconcile_s * 1000;
      await mapLimit(await this.wanted(), SERVER_CALLS, async (role) => {
        try {
          const fresh = (this.compared.get(role) ?? -Infinity) > due;
          if (!this.homes.storeOf(role)) {
            // A Home another host put on the server since this one started (its main announced: at once).
            if (fresh) return;
            this.compared.set(role, performance.now());
            if ((await this.seed(role)) === 'fetched') await this.opening(role);
            return;
          }
          if (!this.writers.has(role) && !fresh) {
            const theirs = (await this.server(role).refs(MAIN_REF)).get(MAIN_REF);
            if (theirs) await this.follow(role, theirs);
            else await this.seed(role);
            this.compared.set(role, performance.now());
          }
          if (!this.writers.has(role)) await this.campaign(role);
          clusterMeter.queue(role, await this.etcd.count(`homes/${role}/queue/`));
        } catch (err) {
          this.log.warn({ role, err: (err as Error).message }, 'cluster: reconcile of the Home failed; the next pass retries');
        }
      });
      await this.rebalance();
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cluster: reconcile pass failed; the next one retries');
    } finally {
      this.reconciling = false;
    }
  }

  /** Homes fetched by the reconcile open one at a time. */
  private opened: Promise<void> = Promise.resolve();
  private opening(role: string): Promise<void> {
    const next = this.opened.then(() => this.homes.open(role));
    this.opened = next.catch(() => undefined);
    return next;
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
      const held = await this.etcd.json<{ host: string }>(key);
      if (held) {
        // This host's role with no writer here (its release failed, etcd unreachable then): given back now.
        if (held.value.host === this.config.host && !this.writers.has(role)) await this.etcd.kv.if(key, 'Create', '==', held.create).then(this.etcd.kv.delete().key(key)).commit();
        return;
      }
      // Ranked among the hosts serving (one still opening its Homes, or stopping, takes no role now).
      const serving = await this.membership.servingHosts();
      const found = rankFor(role, serving).indexOf(this.config.host);
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
   * Writers move to the host rendezvous hashing ranks first once it has served 2 s (looked at again then), between
   * batches; a few at a time.
   */
  private settling: NodeJS.Timeout | null = null;
  /** Writers told to stop for another host (a writer ends its batch first): told once. */
  private readonly handed = new WeakSet<MergeWriter>();
  private async rebalance(): Promise<void> {
    if (this.writers.size === 0 || this.closed) return;
    const serving = await this.membership.servingHosts();
    let soonest = Infinity;
    await mapLimit([...this.writers], SERVER_CALLS, async ([role, writer]) => {
      const first = rankFor(role, serving)[0];
      const since = serving.find((h) => h.host === first)?.serving;
      if (!first || first === this.config.host || !since) return;
      const wait = Date.parse(since) + 2000 - Date.now();
      if (wait > 0) return void (soonest = Math.min(soonest, wait));
      if (this.handed.has(writer) || (await this.etcd.count(`homes/${role}/queue/`)) > 0) return;
      this.handed.add(writer);
      this.log.info({ role, to: first }, 'cluster: handing the Home\'s writer role to the host ranked first for it');
      writer.stop();
    });
    if (soonest < Infinity && !this.settling) {
      this.settling = setTimeout(() => {
        this.settling = null;
        void this.rebalance().catch(() => undefined); // the reconcile's tick tries again
      }, soonest + 100);
      this.settling.unref();
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
    return this.ask(role, `queue/${proposal.id}`, proposal.id, proposal);
  }

  /** A person's decision on a PR, carried out by the Home's writer (it alone writes main and the records). */
  async decide(role: string, d: Omit<Decision, 'id' | 'host' | 'at'>): Promise<ProposalResult> {
    const decision: Decision = { ...d, id: proposalId(this.config.host), host: this.config.host, at: new Date().toISOString() };
    return this.ask(role, `decisions/${decision.id}`, decision.id, decision);
  }

  private async ask(role: string, key: string, id: string, value: object): Promise<ProposalResult> {
    const answered = new Promise<ProposalResult>((resolve) => this.waiters.set(id, resolve));
    try {
      try {
        await this.etcd.kv.put(`homes/${role}/${key}`).value(JSON.stringify(value));
      } catch (err) {
        throw new UserError(`cannot reach etcd, so nothing was queued (${(err as Error).message}): try again`, 503);
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
    // First the record: the others stop handing roles to this host before it lets its own go.
    if (!this.closed && this.homes) await this.membership.serving(false).catch(() => undefined);
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.settling) clearTimeout(this.settling);
    const writers = [...this.writers.values()];
    for (const w of writers) w.stop();
    await Promise.all(writers.map((w) => w.done));
    await this.watcher?.cancel().catch(() => undefined);
    await this.membership.leave();
    this.etcd.close();
  }
}
