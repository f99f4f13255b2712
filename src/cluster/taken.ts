import type { Logger } from 'pino';
import type { PullRequest } from '../merge/pr-store.js';
import type { ServerRepo, Store } from '../store/store.js';
import type { Filer } from './writer.js';
import type { Proposal } from './proposal.js';
import { writeShipped, type Shipped } from './objects.js';

/**
 * What the merge writer keeps between batches so that a batch costs what it holds, not what the Home's history
 * holds: the proposals' heads fetched together as they are queued, and which PR answered which proposal.
 */

/**
 * Proposals' heads from the git server, by id: the heads queued while a fetch runs go together in the next one
 * (a burst of 20 proposals is a few fetches, not 20).
 */
export class HeadFetcher {
  private readonly pending = new Set<string>();
  /** Each head asked for, and the fetch that brings it (kept a minute: a batch waits on it). */
  private readonly fetching = new Map<string, Promise<void>>();
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly store: Store, private readonly server: ServerRepo, private readonly log: Logger) {}

  /** Bring this head soon, beside whatever the writer does now: from the objects sent with it, else fetched. */
  prefetch(head: string, objects?: Shipped): void {
    if (this.fetching.has(head)) return;
    const written = objects ? writeShipped(this.store, objects).catch(() => false) : Promise.resolve(false);
    const fetched = written.then((here) => {
      if (here) return;
      this.pending.add(head);
      // The first link to run after the head was added takes it, with every other head added by then.
      // A link that fails (findCommit) ends there: the chain goes on, the writer's fetchAll looks for the head again.
      return (this.chain = this.chain.then(() => this.fetchPending()).catch(() => undefined));
    });
    this.fetching.set(head, fetched);
    void fetched.then(() => setTimeout(() => this.fetching.delete(head), 60_000).unref());
  }

  /** A batch's heads this Store lacks: those asked for already are waited on, the rest fetched in one call. */
  async fetchAll(queued: Proposal[]): Promise<void> {
    const heads = queued.map((p) => p.head);
    await Promise.all(queued.map((p) => this.fetching.get(p.head) ?? (p.objects ? writeShipped(this.store, p.objects).catch(() => false) : undefined)));
    const missing: string[] = [];
    for (const h of new Set(heads)) if (!(await this.store.findCommit(h))) missing.push(h);
    await this.fetch(missing);
  }

  private async fetchPending(): Promise<void> {
    const heads = [...this.pending];
    this.pending.clear();
    const missing: string[] = [];
    for (const h of heads) if (!(await this.store.findCommit(h))) missing.push(h);
    await this.fetch(missing);
  }

  /** Protocol v2 serves any commit the server has; a failure leaves it to the fetch by the host's ref (writer.ts). */
  private async fetch(heads: string[]): Promise<void> {
    await this.server.fetchCommits(heads).catch((err) => this.log.debug({ err: (err as Error).message }, 'cluster: fetch by id failed; by ref next'));
  }
}

/**
 * Which PR answered which proposal, and which PR merged which head, among this Store's records: read whole once
 * per writer term (and again after a resync), then kept as the writer files PRs. A hit is read again by id, so
 * its state is the record's as it is now.
 */
export class TakenIndex {
  private index: Promise<{ byProposal: Map<string, number>; mergedHead: Map<string, number> }> | null = null;

  constructor(private readonly role: string, private readonly filer: Filer) {}

  /** The records changed under the writer (a resync): read them again when next asked. */
  forget(): void {
    this.index = null;
  }

  async byProposal(id: string): Promise<PullRequest | undefined> {
    const pr = (await this.load()).byProposal.get(id);
    return pr === undefined ? undefined : this.filer.record(this.role, pr);
  }

  /** The merged PR of this head, if one is. */
  async mergedHead(head: string): Promise<PullRequest | undefined> {
    const pr = (await this.load()).mergedHead.get(head);
    const record = pr === undefined ? undefined : await this.filer.record(this.role, pr);
    return record?.state === 'merged' ? record : undefined;
  }

  /** A PR this writer filed or decided. */
  add(pr: PullRequest): void {
    void this.load().then((i) => this.note(i, pr));
  }

  private load() {
    this.index ??= this.filer.records(this.role).then((prs) => {
      const i = { byProposal: new Map<string, number>(), mergedHead: new Map<string, number>() };
      for (const pr of prs) this.note(i, pr);
      return i;
    });
    return this.index;
  }

  private note(i: { byProposal: Map<string, number>; mergedHead: Map<string, number> }, pr: PullRequest): void {
    if (pr.provenance.proposal) i.byProposal.set(pr.provenance.proposal, pr.id);
    if (pr.state === 'merged') i.mergedHead.set(pr.head, pr.id);
  }
}
