import type { Logger } from 'pino';
import { MAIN_REF, PRS_REF } from '../store/refs.js';
import { StalePush, type ServerRepo, type Store } from '../store/store.js';
import type { PullRequest } from '../merge/pr-store.js';
import { UserError } from '../util/errors.js';
import { hostBranchRef, type Proposal, type ProposalResult } from './proposal.js';
import type { ClusterEtcd } from './etcd.js';
import type { Membership } from './hosts.js';
import { clusterMeter } from './cluster-meter.js';

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
  /** PRs of a Home on this host's Store. */
  records(role: string): Promise<PullRequest[]>;
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

const IDLE_POLL_MS = 5000;

/** Test builds only: kill this process at one of the points a writer can die (the cluster suite's fail-overs). */
const CRASH_AT = process.env.NAS_TEST_CLUSTER_CRASH_AT ?? '';

export class MergeWriter {
  private stopped = false;
  private wake: () => void = () => undefined;
  private failedPushes = 0;
  /** The server's main and PR records as this writer last saw or pushed them: every push expects them. */
  private serverMain: string | null = null;
  private serverPrs: string | null = null;
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
    this.done = this.loop();
  }

  /** Something was queued: look now rather than at the next poll; a proposal's head is fetched at once, beside the round under way. */
  poke(queued?: Proposal): void {
    if (queued?.head && !this.prefetching.has(queued.head)) {
      const fetched = this.server.fetchCommits([queued.head]).catch(() => undefined);
      this.prefetching.set(queued.head, fetched);
      void fetched.then(() => setTimeout(() => this.prefetching.delete(queued.head), 60_000).unref());
    }
    this.wake();
  }

  private readonly prefetching = new Map<string, Promise<void>>();

  stop(): void {
    this.stopped = true;
    this.wake();
  }

  private key = (k: string) => `homes/${this.role}/${k}`;

  private async loop(): Promise<void> {
    let why = 'stopped';
    try {
      await this.resync();
      while (!this.stopped) {
        const queued = (await this.etcd.list<Proposal>(this.key('queue/'), this.batch)).map((q) => q.value);
        const decisions = (await this.etcd.list<Decision>(this.key('decisions/'), this.batch)).map((q) => q.value);
        if (queued.length === 0 && decisions.length === 0) {
          // The watch pokes at each proposal; the poll is for one it missed (200 idle Homes cost 80 reads/s at 5 s).
          await new Promise<void>((r) => {
            const t = setTimeout(r, IDLE_POLL_MS);
            this.wake = () => {
              clearTimeout(t);
              r();
            };
          });
          continue;
        }
        const outcome = await this.round(queued, decisions);
        if (outcome !== 'ok') {
          why = outcome;
          break;
        }
      }
    } catch (err) {
      why = `failed: ${(err as Error).message}`;
      this.log.error({ err, role: this.role }, 'cluster: the merge writer failed; it steps down');
    } finally {
      this.onEnd(why);
    }
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
    if (before !== this.serverMain) this.onMain();
  }

  /** One batch: merge, push, publish, clear. Anything but 'ok' ends this writer. */
  private async round(queued: Proposal[], decisions: Decision[]): Promise<string> {
    const t0 = performance.now();
    const results: ProposalResult[] = [];
    const prs = await this.filer.records(this.role);
    await this.fetchHeads(queued);
    for (const p of queued) results.push(await this.take(p, prs));
    for (const d of decisions) results.push(await this.carryOut(d));
    crash('after-merge');
    const t1 = performance.now();

    const [main, records] = await Promise.all([this.store.readRef(MAIN_REF), this.store.readRef(PRS_REF)]);
    if (main !== this.serverMain || records !== this.serverPrs) {
      if (!this.membership.fresh()) return 'its etcd lease may have lapsed: it does not push';
      try {
        await this.server.push([
          { from: MAIN_REF, to: MAIN_REF, expected: this.serverMain },
          ...(records ? [{ from: PRS_REF, to: PRS_REF, expected: this.serverPrs }] : []),
        ]);
        this.failedPushes = 0;
        this.serverMain = main;
        this.serverPrs = records;
      } catch (err) {
        if (err instanceof StalePush) {
          // Another writer moved main: this one lost (the election check below would fail too), or the server
          // was changed by hand. Start again from the server's main; the queue is untouched.
          this.log.warn({ role: this.role, err: err.message }, 'cluster: main on the git server moved under this writer; re-reading it');
          await this.resync();
          return (await this.stillWriter()) ? 'ok' : 'lost its election';
        }
        this.failedPushes++;
        this.log.warn({ role: this.role, err: (err as Error).message, failures: this.failedPushes }, 'cluster: cannot push main to the git server; the batch waits');
        if (this.failedPushes >= FAILED_PUSHES_TO_RESIGN) return `${this.failedPushes} pushes to the git server failed`;
        await new Promise((r) => setTimeout(r, 1000 * this.failedPushes));
        return 'ok';
      }
    }
    crash('after-push');
    const t2 = performance.now();

    const at = new Date().toISOString();
    const published = JSON.stringify({ commit: this.serverMain, records: this.serverPrs, epoch: this.epoch, host: this.membership.host, at });
    // One transaction, its condition the election: `then` takes every operation at once (a second call replaces the first's).
    const puts = [
      this.etcd.kv.put(this.key('main')).value(published),
      ...results.map((r) => this.etcd.kv.put(this.key(`results/${r.id}`)).value(JSON.stringify({ ...r, main: this.serverMain ?? '', published_at: at, writer: this.membership.host }))),
    ];
    const txn = this.etcd.kv.if(this.key('writer'), 'Create', '==', this.epoch).then(...puts);
    const res = await txn.commit();
    if (!res.succeeded) return 'lost its election';
    clusterMeter.published(this.role);
    crash('after-publish');
    this.log.debug({ role: this.role, proposals: queued.length, decisions: decisions.length, merge_ms: Math.round(t1 - t0), push_ms: Math.round(t2 - t1), publish_ms: Math.round(performance.now() - t2) }, 'cluster: batch published');

    const keys = [...queued.map((p) => `queue/${p.id}`), ...decisions.map((d) => `decisions/${d.id}`)];
    await this.etcd.kv.if(this.key('writer'), 'Create', '==', this.epoch).then(...keys.map((k) => this.etcd.kv.delete().key(this.key(k)))).commit();
    return 'ok';
  }

  private async stillWriter(): Promise<boolean> {
    const held = await this.etcd.json(this.key('writer'));
    return held?.create === this.epoch;
  }

  /** One proposal: answered from the records if it was taken before (a writer died), else judged and filed. */
  private async take(p: Proposal, prs: PullRequest[]): Promise<ProposalResult> {
    const known = prs.find((pr) => pr.provenance.proposal === p.id);
    if (known) return { id: p.id, pr: known.id, state: known.state, main: '' };
    try {
      if (!(await this.store.findCommit(p.head))) await this.fetchHead(p);
      const main = (await this.store.readRef(MAIN_REF))!;
      if ((await this.store.mergeBase(p.head, main)) === p.head) {
        const merged = prs.find((pr) => pr.head === p.head && pr.state === 'merged');
        if (merged) return { id: p.id, pr: merged.id, state: 'merged', main: '' };
      }
      const pr = await this.filer.fileProposal(this.role, p);
      prs.push(pr);
      return { id: p.id, pr: pr.id, state: pr.state, main: '' };
    } catch (err) {
      if (!(err instanceof UserError)) this.log.error({ err, role: this.role, proposal: p.id }, 'cluster: a proposal could not be filed');
      return { id: p.id, error: (err as Error).message, status: err instanceof UserError ? err.status : 500, main: '' };
    }
  }

  /** The batch's heads this Store lacks, in one fetch by id (protocol v2 serves any commit the server has). */
  private async fetchHeads(queued: Proposal[]): Promise<void> {
    const missing: string[] = [];
    for (const p of queued) {
      await this.prefetching.get(p.head);
      if (!(await this.store.findCommit(p.head))) missing.push(p.head);
    }
    await this.server.fetchCommits([...new Set(missing)]).catch((err) => this.log.debug({ err: (err as Error).message }, 'cluster: fetch by id failed; by ref next'));
  }

  /** A head the fetch by id did not bring: by the ref the proposing host pushed it to (a server that serves only those). */
  private async fetchHead(p: Proposal): Promise<void> {
    await this.server.fetch([[hostBranchRef(p.host, p.branch), `refs/nas/cluster/incoming`]]);
    if (!(await this.store.findCommit(p.head))) throw new UserError(`the proposed commit ${p.head.slice(0, 12)} of ${p.branch} is not on the git server (the proposing host ${p.host} moved it on?)`, 409);
  }

  private async carryOut(d: Decision): Promise<ProposalResult> {
    try {
      const pr = await this.filer.carryOut(this.role, d);
      return { id: d.id, pr: pr.id, state: pr.state, main: '' };
    } catch (err) {
      return { id: d.id, error: (err as Error).message, status: err instanceof UserError ? err.status : 500, main: '' };
    }
  }
}

function crash(point: string): void {
  if (CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}
