import yaml from 'js-yaml';
import type { HomeSet, Mounted } from '../homes/home-set.js';
import type { HomeSample, RemoteHealth, StateSample } from '../metrics/state-gauges.js';
import type { ObjectCounts } from '../store/types.js';
import { MODE, type Entry, type Store } from '../store/store.js';
import { LEASES_REF, PRS_REF, RUNS_REF, TRASH_REF } from '../store/refs.js';
import { mapLimit } from '../util/concurrency.js';

/** What a scrape needs of one record, parsed once per git object (a record's content never changes under its oid). */
interface PrFact { state: string; action?: string; created: number }
interface LeaseFact { revoked: boolean; expires: number }
interface RunFact { state: string; exit?: string }

/** A Store's size is read with `git count-objects` at most this often (a scrape every few seconds costs no process). */
const STORE_EVERY_MS = 60_000;

/** One record ref as last read: its commit, and the facts of its records by the oid of each record's object. */
interface RefState<T> {
  head: string | null;
  byOid: Map<string, T>;
  values: T[];
}

const count = (keys: string[]): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out;
};

const load = async (store: Store, oid: string): Promise<Record<string, unknown>> =>
  (yaml.load((await store.readBlob(oid)).toString(), { schema: yaml.CORE_SCHEMA }) ?? {}) as Record<string, unknown>;

/** The record file inside a record's folder (a PR's `<id>/pr.yaml`, a recycle entry's `<day>/<id>/record.yaml`). */
const inFolder = (name: string) => async (store: Store, e: Entry): Promise<Record<string, unknown>> => {
  const file = (await store.readTree(e.oid)).get(name);
  return file ? load(store, file.oid) : {};
};

/**
 * The state a /metrics scrape reports, gathered from what nasd keeps: branch views (in memory) and the Homes'
 * record refs (PRs, leases, runs, recycle area). A record ref is walked again only when its commit moved, and then
 * only records it has not seen (by object id) are read: a busy recycle area of thousands of entries costs one
 * tree read per day folder, not thousands of reads, each scrape.
 */
export class MetricsSampler {
  private readonly refs = new Map<string, RefState<unknown>>();
  private readonly stores = new Map<string, { at: number; counts: ObjectCounts }>();

  /** `remotes`: each Home's mirrors as the replicator last found them. */
  constructor(
    private readonly homes: HomeSet,
    private readonly remotes: (role: string) => Promise<RemoteHealth[]> = async () => [],
    private readonly now: () => number = Date.now,
  ) {}

  async sample(): Promise<StateSample> {
    const homes: HomeSample[] = [];
    for (const m of this.homes.all()) homes.push(await this.home(m));
    // Homes gone since (archived, or a failed import) leave no cached records behind.
    const live = new Set(this.homes.roles());
    for (const key of this.refs.keys()) if (!live.has(key.slice(0, key.indexOf('\0')))) this.refs.delete(key);
    for (const role of this.stores.keys()) if (!live.has(role)) this.stores.delete(role);
    return { homes, archived: this.homes.archived.size, kernelCache: this.homes.kernelCache.stats?.() };
  }

  /**
   * The facts of every record under `ref`: the entries `depth` folders below its tree's top (0: the top's own
   * entries), each parsed by `parse` unless an entry with that oid was parsed before.
   */
  private async records<T>(m: Mounted, ref: string, depth: number, parse: (store: Store, e: Entry) => Promise<T>): Promise<T[]> {
    const { store } = m.home;
    const key = `${m.home.role}\0${ref}`;
    const head = await store.readRef(ref);
    const was = this.refs.get(key) as RefState<T> | undefined;
    if (was && was.head === head) return was.values;
    let level: Entry[] = head ? [...(await store.readTree((await store.readCommit(head)).tree)).values()] : [];
    for (let d = 0; d < depth; d++) {
      const folders = await mapLimit(level.filter((e) => e.mode === MODE.tree), 8, (e) => store.readTree(e.oid));
      level = folders.flatMap((t) => [...t.values()]);
    }
    const byOid = new Map<string, T>();
    const fresh: Entry[] = [];
    for (const e of level) {
      const known = was?.byOid.get(e.oid);
      if (known !== undefined) byOid.set(e.oid, known);
      else fresh.push(e);
    }
    const parsed = await mapLimit(fresh, 8, (e) => parse(store, e));
    fresh.forEach((e, i) => byOid.set(e.oid, parsed[i]));
    const state: RefState<T> = { head, byOid, values: level.map((e) => byOid.get(e.oid)!) };
    this.refs.set(key, state as RefState<unknown>);
    return state.values;
  }

  /** The Store's size, read again when the last reading is a minute old; none if git cannot say. */
  private async storeSize(m: Mounted): Promise<ObjectCounts | undefined> {
    const role = m.home.role;
    const was = this.stores.get(role);
    if (was && this.now() - was.at < STORE_EVERY_MS) return was.counts;
    const counts = await m.home.store.objectCounts().catch(() => undefined);
    if (counts) this.stores.set(role, { at: this.now(), counts });
    return counts ?? was?.counts;
  }

  private async home(m: Mounted): Promise<HomeSample> {
    const views = [...m.branches.values()];
    const now = this.now();
    const pr = inFolder('pr.yaml');
    const prs = await this.records<PrFact>(m, PRS_REF, 0, async (store, e) => {
      const r = await pr(store, e);
      return { state: String(r.state), action: (r.decision as { action?: string } | undefined)?.action, created: Date.parse(String(r.created)) };
    });
    const leases = await this.records<LeaseFact>(m, LEASES_REF, 0, async (store, e) => {
      const r = await load(store, e.oid);
      return { revoked: Boolean(r.revoked), expires: Date.parse(String(r.expires)) };
    });
    const runs = await this.records<RunFact>(m, RUNS_REF, 0, async (store, e) => {
      const r = await load(store, e.oid);
      const ended = r.state === 'exited' || r.state === 'killed';
      const exit = r.signal ? String(r.signal) : r.exit !== undefined ? String(r.exit) : undefined;
      return { state: String(r.state), ...(ended && exit !== undefined ? { exit } : {}) };
    });
    const record = inFolder('record.yaml');
    const trash = await this.records<number>(m, TRASH_REF, 1, async (store, e) => Number((await record(store, e)).size) || 0);
    const waiting = prs.filter((p) => p.state === 'waiting' && Number.isFinite(p.created)).map((p) => p.created);
    return {
      home: m.home.role,
      branches: views.length,
      expiredBranches: views.filter((v) => v.expired).length,
      pendingChanges: views.reduce((n, v) => n + v.pendingChanges, 0),
      bytesUsed: m.pool.used,
      store: await this.storeSize(m),
      remotes: await this.remotes(m.home.role).catch(() => []),
      quotaBytes: m.pool.limit,
      fullestBranch: views.reduce((most, v) => {
        const { used, limit } = v.quota;
        return limit > 0 && Number.isFinite(limit) ? Math.max(most, used / limit) : most;
      }, 0),
      trashItems: trash.length,
      trashBytes: trash.reduce((n, size) => n + size, 0),
      prs: count(prs.map((p) => p.state)),
      approved: prs.filter((p) => p.action === 'approve').length,
      rejected: prs.filter((p) => p.action === 'reject').length,
      oldestWaiting: waiting.length ? Math.max(0, (now - Math.min(...waiting)) / 1000) : 0,
      leases: count(leases.map((l) => (l.revoked ? 'revoked' : l.expires <= now ? 'expired' : 'active'))),
      runs: count(runs.map((r) => r.state)),
      runExits: count(runs.flatMap((r) => (r.exit !== undefined ? [r.exit] : []))),
    };
  }
}
