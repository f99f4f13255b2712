import type { HomeSet, Mounted } from '../homes/home-set.js';
import type { HomeSample, StateSample } from '../metrics/state-gauges.js';
import { prsOf } from '../merge/propose.js';
import type { PullRequest } from '../merge/pr-store.js';
import { LeaseStore } from '../lease/lease-store.js';
import type { Lease } from '../lease/lease.js';
import { RunStore } from '../run/run-store.js';
import { LEASES_REF, PRS_REF, RUNS_REF, TRASH_REF } from '../store/refs.js';

/** What one record ref held when it was last read: its commit, and what the scrape needs of it. */
interface Cached<T> {
  oid: string | null;
  value: T;
}

interface PrFacts {
  states: Record<string, number>;
  approved: number;
  rejected: number;
  /** When each waiting PR was proposed (ms): its age is taken at scrape time. */
  waitingSince: number[];
}

const count = (keys: string[]): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out;
};

/**
 * The state a /metrics scrape reports, gathered from what nasd keeps: branch views (in memory) and the Homes'
 * record refs (PRs, leases, runs, recycle area). A record ref is read again only when its commit moved, so a
 * scrape costs four ref reads per Home while nothing changes.
 */
export class MetricsSampler {
  private readonly cache = new Map<string, Cached<unknown>>();

  constructor(private readonly homes: HomeSet, private readonly now: () => number = Date.now) {}

  async sample(): Promise<StateSample> {
    const homes: HomeSample[] = [];
    for (const m of this.homes.all()) homes.push(await this.home(m));
    return { homes, archived: this.homes.archived.size };
  }

  /** The value computed from a ref's records, read again only when the ref moved. */
  private async cached<T>(m: Mounted, ref: string, read: () => Promise<T>): Promise<T> {
    const key = `${m.home.role}\0${ref}`;
    const oid = await m.home.store.readRef(ref);
    const hit = this.cache.get(key) as Cached<T> | undefined;
    if (hit && hit.oid === oid) return hit.value;
    const value = await read();
    this.cache.set(key, { oid, value });
    return value;
  }

  private async home(m: Mounted): Promise<HomeSample> {
    const { home } = m;
    const views = [...m.branches.values()];
    const now = this.now();
    const prs = await this.cached<PrFacts>(m, PRS_REF, async () => prFacts(await prsOf(home).list()));
    const leases = await this.cached<Lease[]>(m, LEASES_REF, () => new LeaseStore(home.store, home.identity).list());
    const runs = await this.cached<Record<string, number>>(m, RUNS_REF, async () => count((await new RunStore(home.store, home.identity).list()).map((r) => r.state)));
    const trash = await this.cached<{ items: number; bytes: number }>(m, TRASH_REF, async () => {
      const records = await home.trash.list();
      return { items: records.length, bytes: records.reduce((n, r) => n + (r.size || 0), 0) };
    });
    const oldest = prs.waitingSince.length ? Math.min(...prs.waitingSince) : null;
    return {
      home: home.role,
      branches: views.length,
      expiredBranches: views.filter((v) => v.expired).length,
      pendingChanges: views.reduce((n, v) => n + v.pendingChanges, 0),
      bytesUsed: m.pool.used,
      quotaBytes: m.pool.limit,
      fullestBranch: views.reduce((most, v) => {
        const { used, limit } = v.quota;
        return limit > 0 && Number.isFinite(limit) ? Math.max(most, used / limit) : most;
      }, 0),
      trashItems: trash.items,
      trashBytes: trash.bytes,
      prs: prs.states,
      approved: prs.approved,
      rejected: prs.rejected,
      oldestWaiting: oldest === null ? 0 : Math.max(0, (now - oldest) / 1000),
      leases: count(leases.map((l) => (l.revoked ? 'revoked' : Date.parse(l.expires) <= now ? 'expired' : 'active'))),
      runs: runs,
    };
  }
}

function prFacts(prs: PullRequest[]): PrFacts {
  return {
    states: count(prs.map((p) => p.state)),
    approved: prs.filter((p) => p.decision?.action === 'approve').length,
    rejected: prs.filter((p) => p.decision?.action === 'reject').length,
    waitingSince: prs.filter((p) => p.state === 'waiting').map((p) => Date.parse(p.created)).filter(Number.isFinite),
  };
}
