import type { Logger } from 'pino';
import { MAIN_REF, PRS_REF } from '../store/refs.js';
import type { ServerRepo, Store } from '../store/store.js';
import { clusterMeter } from './cluster-meter.js';
import { writeShipped, type Shipped } from './objects.js';

/**
 * Following main: this host's main and PR records made the server's (one fetch), and the mount told, as for a
 * local merge. One fetch at a time per Home; a writer's own Store is never overwritten (it is what the server
 * gets next). How long this host trailed is the lag metric.
 */
export class MainFollower {
  private readonly following = new Map<string, Promise<void>>();
  /** When this host's main of each Home last differed from the published one. */
  private readonly behindSince = new Map<string, number>();

  constructor(private readonly o: {
    storeOf(role: string): Store | null;
    writing(role: string): boolean;
    server(role: string): ServerRepo;
    refreshMains(): Promise<void>;
    log: Logger;
  }) {}

  /** `commit` and `records`: what was published, when known (nothing is fetched if this host has them). */
  follow(role: string, commit?: string, records?: string | null, objects?: Shipped): Promise<void> {
    const store = this.o.storeOf(role);
    if (!store || this.o.writing(role)) return Promise.resolve();
    const prior = this.following.get(role) ?? Promise.resolve();
    const next = prior.then(async () => {
      if (this.o.writing(role)) return;
      const ours = await store.readRef(MAIN_REF);
      if (commit && ours === commit && (records === undefined || (await store.readRef(PRS_REF)) === records)) return this.current(role);
      if (!this.behindSince.has(role)) this.behindSince.set(role, performance.now());
      const t0 = performance.now();
      const byId = commit && records !== undefined && (await this.byId(store, this.o.server(role), [[MAIN_REF, commit], [PRS_REF, records]], objects));
      if (!byId) await this.o.server(role).fetchMain(MAIN_REF, PRS_REF);
      const t1 = performance.now();
      if ((await store.readRef(MAIN_REF)) !== ours) await this.o.refreshMains();
      this.o.log.debug({ role, commit, by_id: byId, fetch_ms: Math.round(t1 - t0), refresh_ms: Math.round(performance.now() - t1) }, 'cluster: followed main');
      this.current(role);
    }).catch((err) => this.o.log.warn({ role, err: (err as Error).message }, 'cluster: cannot follow main from the git server; the reconcile retries'));
    this.following.set(role, next);
    return next;
  }

  /**
   * The refs moved to what was published, its commits fetched by id (one request less than by ref, no list of
   * the server's refs): only forward, from what this host has to a descendant. Anything else (an announcement
   * older than what is here, a main rewritten on the server) is left to the fetch by ref: false.
   */
  private async byId(store: Store, server: ServerRepo, wanted: [string, string | null][], objects?: Shipped): Promise<boolean> {
    const moves: { ref: string; to: string; ours: string | null }[] = [];
    for (const [ref, to] of wanted) {
      const ours = await store.readRef(ref);
      if (to && ours !== to) moves.push({ ref, to, ours });
    }
    const missing: string[] = [];
    try {
      // Sent with the announcement (objects.ts): no fetch at all when they are whole. Each commit looked for
      // whatever writeShipped said (cheap): objects that were not the announced ones leave it missing, so fetched.
      if (objects && moves.length > 0) await writeShipped(store, objects);
      for (const m of moves) if (!(await store.findCommit(m.to))) missing.push(m.to);
      await server.fetchCommits(missing);
      for (const m of moves) if (m.ours && (await store.mergeBase(m.ours, m.to)) !== m.ours) return false;
      // main first: the records of a merge never show before it.
      for (const m of moves) await store.updateRef(m.ref, m.to, m.ours, 'nas cluster: main as the writer published it');
      return true;
    } catch (err) {
      this.o.log.debug({ err: (err as Error).message }, 'cluster: following main by id failed; by ref');
      return false;
    }
  }

  private current(role: string): void {
    const since = this.behindSince.get(role);
    clusterMeter.lag(role, since === undefined ? 0 : (performance.now() - since) / 1000);
    this.behindSince.delete(role);
  }
}
