import type { Logger } from 'pino';
import { MAIN_REF, PRS_REF } from '../store/refs.js';
import { StalePush, type ServerRepo, type Store } from '../store/store.js';
import type { PullRequest } from '../merge/pr-store.js';
import { UserError } from '../util/errors.js';
import { hostBranchRef, type Proposal, type ProposalResult } from './proposal.js';
import type { ClusterEtcd } from './etcd.js';
import type { Membership } from './hosts.js';
import { clusterMeter } from './cluster-meter.js';
import { HeadFetcher, TakenIndex } from './taken.js';
import { objectsSince, type Shipped } from './objects.js';

/**
 * The merge writer of one Home, while this host holds its election: takes the queued proposals in order,
 * judges and merges each with nasd's own PR workflow into this host's Store, pushes main (and the PR records)
 * to the git server once per batch with compare-and-swap, then publishes "main moved" and each proposal's
 * result in one etcd transaction that also checks the election, and clears the queue.
 *
 * Safe to crash anywhere: a proposal leaves the queue only after its merge is on the server, and a proposal
 * whose head is on main already (a writer died after its push) is answered from the PR records, not merged again.
 */

/** What the PR workflow does for the writer (workflows/prs.ts): judge and file a proposal, merge it by policy. */
export interface Filer {
  fileProposal(role: string, p: Proposal): Promise<PullRequest>;
  carryOut(role: string, d: Decision): Promise<PullRequest>;
  /** PRs of a Home on this host's Store, whole (once per writer term: taken.ts keeps an index after). */
  records(role: string): Promise<PullRequest[]>;
  /** One PR by id, as this host's Store has it now. */
  record(role: string, id: number): Promise<PullRequest | undefined>;
}

/** A person's decision taken on another host (`homes/<role>/decisions/<id>`): the writer carries it out. */
export interface Decision {
  id: string;
  host: string;
  pr: number;
  action: 'approve' | 'reject';
  why?: string;
  at: string;
}

/** Pushes that fail for another reason than a moved ref (the server down) before the writer steps down. */
const FAILED_PUSHES_TO_RESIGN = 3;

/** With nothing queued, how often the writer looks anyway. */
const IDLE_POLL_MS = 5000;

/** Test builds only: kill this process at one of the points a writer can die (the cluster suite's fail-overs). */
const CRASH_AT = process.env.NAS_TEST_CLUSTER_CRASH_AT ?? '';

/** One proposal or decision taken by this writer: its key in the queue and its answer. */
interface Taken {
  key: string;
  result: ProposalResult;
}

/** A batch on its way to the git server and etcd: its keys, and how it ended ('ok', 'retry', 'stale' or why the writer ends). */
interface Shipping {
  batch: Taken[];
  outcome: Promise<string>;
  settled: boolean;
}

export class MergeWriter {
  private stopped = false;
  private failedPushes = 0;
  /** The server's main and PR records as this writer last saw or pushed them: every push expects them. */
  private serverMain: string | null = null;
  private serverPrs: string | null = null;
  /** Resolved by poke() (and stop()): made anew before each look at the queue, so no poke goes unseen. */
  private nudged: Promise<void> = Promise.resolve();
  private nudge: () => void = () => undefined;
  private readonly heads: HeadFetcher;
  private readonly taken: TakenIndex;
  readonly done: Promise<void>;

  constructor(
    private readonly role: string,
    readonly epoch: string,
    private readonly store: Store,
    private readonly server: ServerRepo,
    private readonly etcd: ClusterEtcd,
    private readonly membership: Membership,
    private readonly filer: Filer,
    private readonly batch: number,
    private readonly log: Logger,
    /** The writer stepped down or lost its election: the caller forgets it (and may campaign again). */
    private readonly onEnd: (why: string) => void,
    /** main moved on this host's Store (the mount follows). */
    private readonly onMain: () => void,
  ) {
    this.heads = new HeadFetcher(store, server, log);
    this.taken = new TakenIndex(role, filer);
    this.done = this.loop();
  }

  /** Something was queued: look now rather than at the next poll; a proposal's head is fetched at once, beside the merges under way. */
  poke(queued?: Proposal): void {
    if (queued?.head) this.heads.prefetch(queued.head, queued.objects);
    this.nudge();
  }

  stop(): void {
    this.stopped = true;
    this.nudge();
  }

  private key = (k: string) => `homes/${this.role}/${k}`;

  private async loop(): Promise<void> {
    let why = 'stopped';
    try {
      await this.resync();
      why = await this.pipeline();
    } catch (err) {
      why = `failed: ${(err as Error).message}`;
      this.log.error({ err, role: this.role }, 'cluster: the merge writer failed; it steps down');
    } finally {
      this.onEnd(why);
    }
  }

  /**
   * Merging goes on while the batch before is pushed and published: what was merged meanwhile is the next batch,
   * pushed as soon as that one is out (one push at a time, each expecting what the one before left on the server).
   * A burst merges in a few batches, and a proposal waits for at most the push under way, not a whole round.
   */
  private async pipeline(): Promise<string> {
    let merged: Taken[] = [];
    let shipping: Shipping | null = null;
    for (;;) {
      if (shipping?.settled) {
        const outcome = await shipping.outcome;
        // Not pushed (the server unreachable): the batch goes again on its own (with what was merged since, it could
        // pass etcd's 128 operations in one transaction); what was merged since is the next batch. Stopped: it stays queued.
        if (outcome === 'retry' && !this.stopped) {
          shipping = this.ship(shipping.batch);
          continue;
        }
        // main on the server moved under this writer: this Store takes it here, where no merge is under way (a resync
        // beside mergeAll could undo a merge its record calls done). What was merged here is gone, and still queued.
        if (outcome === 'stale') {
          await this.resync();
          if (!(await this.stillWriter())) return 'lost its election';
          merged = [];
        } else if (outcome !== 'ok' && outcome !== 'retry') return outcome;
        shipping = null;
      }
      if (this.stopped) {
        // The push under way ends; what was merged after it stays queued for the next writer (this Store follows
        // the server's main once the role is given back), so a writer whose lease lapsed pushes nothing new.
        if (!shipping) return 'stopped';
        await shipping.outcome.catch(() => undefined);
        continue;
      }
      if (!shipping && merged.length > 0) {
        crash('after-merge');
        shipping = this.ship(merged);
        merged = [];
        continue;
      }
      this.nudged = new Promise((r) => (this.nudge = r));
      const fresh = await this.look(merged, shipping?.batch ?? []);
      if (fresh.queued.length + fresh.decisions.length > 0) {
        merged.push(...(await this.mergeAll(fresh.queued, fresh.decisions)));
        continue;
      }
      // Nothing new: wait for the push under way, a poke, or (idle) the poll for a proposal the watch missed.
      // 200 idle Homes cost 80 reads/s at 5 s.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.nudged, shipping?.outcome.then(() => undefined, () => undefined) ?? new Promise<void>((r) => (timer = setTimeout(r, IDLE_POLL_MS)))]);
      clearTimeout(timer);
    }
  }

  /**
   * What waits in the queue and the decisions beside what this writer holds already (merged, not yet pushed; and
   * the batch being pushed): the next batch holds at most `batch` of each (one etcd transaction publishes it).
   */
  private async look(merged: Taken[], shipping: Taken[]): Promise<{ queued: Proposal[]; decisions: Decision[] }> {
    const held = new Set([...merged, ...shipping].map((t) => t.key));
    const room = (prefix: string) => this.batch - merged.filter((t) => t.key.startsWith(prefix)).length;
    const [queued, decisions] = await Promise.all((['queue/', 'decisions/'] as const).map(async (prefix) => {
      if (room(prefix) <= 0) return [];
      const listed = await this.etcd.list<Proposal & Decision>(this.key(prefix), this.batch + held.size);
      return listed.filter((q) => !held.has(q.key.slice(this.key('').length))).slice(0, room(prefix)).map((q) => q.value);
    }));
    return { queued, decisions };
  }

  /**
   * The server's main and PR records over this host's (a writer starts from the truth): asked first, fetched only
   * where they differ. A host that just followed main (the usual new writer) makes one call, not a fetch and, for a
   * Home with no PR yet, a second one without the records.
   */
  private async resync(): Promise<void> {
    const [before, records] = await Promise.all([this.store.readRef(MAIN_REF), this.store.readRef(PRS_REF)]);
    const theirs = await this.server.refs(MAIN_REF, PRS_REF);
    const stale = ([[MAIN_REF, before], [PRS_REF, records]] as const).filter(([ref, ours]) => theirs.has(ref) && theirs.get(ref) !== ours);
    await this.server.fetch(stale.map(([ref]) => [ref, ref]));
    // As the server had them: no one else pushes these refs while this writer holds its role. Records only this
    // Store has (the server has none) go with the next push.
    this.serverMain = theirs.get(MAIN_REF) ?? null;
    this.serverPrs = theirs.get(PRS_REF) ?? null;
    this.taken.forget();
    if (before !== this.serverMain) this.onMain();
  }

  /** Judge and merge what was listed, into this Store (nothing leaves it here). */
  private async mergeAll(queued: Proposal[], decisions: Decision[]): Promise<Taken[]> {
    const t0 = performance.now();
    await this.heads.fetchAll(queued);
    const t1 = performance.now();
    const out: Taken[] = [];
    const takes: number[] = [];
    for (const p of queued) {
      const started = performance.now();
      out.push({ key: `queue/${p.id}`, result: await this.take(p) });
      takes.push(Math.round(performance.now() - started));
    }
    for (const d of decisions) out.push({ key: `decisions/${d.id}`, result: await this.carryOut(d) });
    this.log.debug({ role: this.role, proposals: queued.length, decisions: decisions.length, heads_ms: Math.round(t1 - t0), takes_ms: takes.join(' ') }, 'cluster: merged');
    return out;
  }

  /** Push a batch's main, then publish its results and clear its keys; settles with what became of it. */
  private ship(batch: Taken[]): Shipping {
    const shipping: Shipping = { batch, settled: false, outcome: Promise.resolve('ok') };
    shipping.outcome = (async () => {
      // What is pushed is main as it is now: the merges after this batch's go with the next push. The records read
      // first: a merge moves main, then its record, so no record pushed says "merged" of a merge main lacks.
      const records = await this.store.readRef(PRS_REF);
      const main = await this.store.readRef(MAIN_REF);
      const t0 = performance.now();
      // The batch's new objects, for the other hosts (objects.ts), gathered while the push runs.
      const objects = objectsSince(this.store, [[main, this.serverMain], [records, this.serverPrs]]).catch(() => null);
      const pushed = await this.push(main, records);
      if (pushed !== 'ok') return pushed;
      crash('after-push');
      const t1 = performance.now();
      if (!(await this.publish(batch, await objects))) return 'lost its election';
      clusterMeter.published(this.role);
      crash('after-publish');
      this.log.debug({ role: this.role, items: batch.length, push_ms: Math.round(t1 - t0), publish_ms: Math.round(performance.now() - t1) }, 'cluster: batch published');
      await this.etcd.kv.if(this.key('writer'), 'Create', '==', this.epoch).then(...batch.map((t) => this.etcd.kv.delete().key(this.key(t.key)))).commit();
      return 'ok';
    })().finally(() => {
      shipping.settled = true;
      this.nudge();
    });
    // Awaited by the pipeline once settled; a rejection meanwhile is not an unhandled one.
    shipping.outcome.catch(() => undefined);
    return shipping;
  }

  /** main and the records to the server by compare-and-swap (by id: later merges here are not this batch's). */
  private async push(main: string | null, records: string | null): Promise<string> {
    // A push from nothing would delete main on the server (the lease allows it): the writer steps down instead.
    if (!main) return "this host's Store has no main: it does not push";
    if (main === this.serverMain && records === this.serverPrs) return 'ok';
    if (!this.membership.fresh()) return 'its etcd lease may have lapsed: it does not push';
    try {
      await this.server.push([
        { from: main, to: MAIN_REF, expected: this.serverMain },
        ...(records ? [{ from: records, to: PRS_REF, expected: this.serverPrs }] : []),
      ]);
      this.failedPushes = 0;
      this.serverMain = main;
      this.serverPrs = records;
      return 'ok';
    } catch (err) {
      if (err instanceof StalePush) {
        // Another writer moved main: this one lost (the election check would fail too), or the server was
        // changed by hand. The pipeline starts again from the server's main; the queue is untouched.
        this.log.warn({ role: this.role, err: err.message }, 'cluster: main on the git server moved under this writer; re-reading it');
        return 'stale';
      }
      this.failedPushes++;
      this.log.warn({ role: this.role, err: (err as Error).message, failures: this.failedPushes }, 'cluster: cannot push main to the git server; the batch waits');
      if (this.failedPushes >= FAILED_PUSHES_TO_RESIGN) return `${this.failedPushes} pushes to the git server failed`;
      await new Promise((r) => setTimeout(r, 1000 * this.failedPushes));
      return 'retry';
    }
  }

  /** "main moved" and each result, in one transaction whose condition is the election. */
  private async publish(batch: Taken[], objects: Shipped | null): Promise<boolean> {
    const at = new Date().toISOString();
    const published = JSON.stringify({ commit: this.serverMain, records: this.serverPrs, epoch: this.epoch, host: this.membership.host, at, ...(objects ? { objects } : {}) });
    // `then` takes every operation at once (a second call replaces the first's).
    const puts = [
      this.etcd.kv.put(this.key('main')).value(published),
      ...batch.map(({ result: r }) => this.etcd.kv.put(this.key(`results/${r.id}`)).value(JSON.stringify({ ...r, main: this.serverMain ?? '', published_at: at, writer: this.membership.host }))),
    ];
    const res = await this.etcd.kv.if(this.key('writer'), 'Create', '==', this.epoch).then(...puts).commit();
    return res.succeeded;
  }

  private async stillWriter(): Promise<boolean> {
    const held = await this.etcd.json(this.key('writer'));
    return held?.create === this.epoch;
  }

  /** One proposal: answered from the records if it was taken before (a writer died), else judged and filed. */
  private async take(p: Proposal): Promise<ProposalResult> {
    const known = await this.taken.byProposal(p.id);
    if (known) return { id: p.id, pr: known.id, state: known.state, main: '' };
    try {
      if (!(await this.store.findCommit(p.head))) await this.fetchHead(p);
      const main = (await this.store.readRef(MAIN_REF))!;
      if ((await this.store.mergeBase(p.head, main)) === p.head) {
        const merged = await this.taken.mergedHead(p.head);
        if (merged) return { id: p.id, pr: merged.id, state: 'merged', main: '' };
      }
      const pr = await this.filer.fileProposal(this.role, p);
      this.taken.add(pr);
      return { id: p.id, pr: pr.id, state: pr.state, main: '' };
    } catch (err) {
      if (!(err instanceof UserError)) this.log.error({ err, role: this.role, proposal: p.id }, 'cluster: a proposal could not be filed');
      return { id: p.id, error: (err as Error).message, status: err instanceof UserError ? err.status : 500, main: '' };
    }
  }

  /** A head the fetch by id did not bring: by the ref the proposing host pushed it to (a server that serves only those). */
  private async fetchHead(p: Proposal): Promise<void> {
    await this.server.fetch([[hostBranchRef(p.host, p.branch), `refs/nas/cluster/incoming`]]);
    if (!(await this.store.findCommit(p.head))) throw new UserError(`the proposed commit ${p.head.slice(0, 12)} of ${p.branch} is not on the git server (the proposing host ${p.host} moved it on?)`, 409);
  }

  private async carryOut(d: Decision): Promise<ProposalResult> {
    try {
      const pr = await this.filer.carryOut(this.role, d);
      this.taken.add(pr);
      return { id: d.id, pr: pr.id, state: pr.state, main: '' };
    } catch (err) {
      return { id: d.id, error: (err as Error).message, status: err instanceof UserError ? err.status : 500, main: '' };
    }
  }
}

function crash(point: string): void {
  if (CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}
