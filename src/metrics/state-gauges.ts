import { Gauge, type Registry } from 'prom-client';
import type { ObjectCounts } from '../store/types.js';

/** A remote a Home mirrors to (`nas remote add`), as the replicator last found it. */
export interface RemoteHealth {
  name: string;
  /** When its last push succeeded (ms since the epoch; absent: never since nasd started). */
  pushed?: number;
  /** Pushes that failed since the last that succeeded (0: it is current or being tried). */
  failures: number;
}

/** One Home as a scrape sees it: numbers nasd already keeps, gathered by the daemon's sampler. */
export interface HomeSample {
  home: string;
  branches: number;
  /** Branches whose TTL passed (read-only, in their grace period). */
  expiredBranches: number;
  /** Changes written in its branches and not committed yet. */
  pendingChanges: number;
  /** Bytes the branches' upper directories hold, against the Home's quota. */
  bytesUsed: number;
  /** The Home's Store (git objects: main, history, records, the recycle area), loose and packed. */
  store?: ObjectCounts;
  remotes: RemoteHealth[];
  quotaBytes: number;
  /** The fullest branch: its bytes over its quota (0..1). */
  fullestBranch: number;
  trashItems: number;
  trashBytes: number;
  /** PRs by state (merged, waiting, conflict, failed, rejected, merging, expired). */
  prs: Record<string, number>;
  /** The owner's decisions recorded on the PRs: approvals and rejections, all time. */
  approved: number;
  rejected: number;
  /** Age of the oldest PR waiting for a person, in seconds (0: none waits). */
  oldestWaiting: number;
  /** Leases by status (active, expired, revoked), runs by state (running, exited, killed...). */
  leases: Record<string, number>;
  runs: Record<string, number>;
  /** Runs that ended, by exit status: `0`, the command's status, or the signal's name. */
  runExits: Record<string, number>;
}

export interface StateSample {
  homes: HomeSample[];
  archived: number;
  /** The FUSE binding's cache: requests it answered itself (hits) and sent to nasd (misses), nodes the kernel holds. */
  kernelCache?: { hits: number; misses: number; nodes: number; written: number };
}

/** States always shown (as 0 when none), so a dashboard's series exist before the first of each. */
const PR_STATES = ['merged', 'waiting', 'conflict', 'failed', 'rejected', 'merging', 'expired', 'superseded'];
const LEASE_STATES = ['active', 'expired', 'revoked'];
const RUN_STATES = ['running', 'exited', 'killed', 'interrupted', 'failed-to-start'];

/**
 * Gauges computed at scrape time: each scrape resets them and sets what the sample says, so a Home that went
 * away (archived, retired elsewhere) leaves no stale series.
 */
export class StateGauges {
  private readonly all: Gauge<string>[] = [];
  private readonly g;

  constructor(registers: Registry[]) {
    const gauge = <L extends string>(name: string, help: string, labelNames: L[]) => {
      const made = new Gauge<L>({ name, help, labelNames, registers });
      this.all.push(made as unknown as Gauge<string>);
      return made;
    };
    this.g = {
      homes: gauge('nas_homes', 'Homes, by state: mounted or archived', ['state']),
      cache: gauge('nas_fuse_cache_requests', 'FUSE requests since start, by who answered: the binding\'s cache (lookups, attributes, listings, reads), its write grants (writes), or nasd', ['by']),
      nodes: gauge('nas_fuse_nodes', 'Nodes the kernel holds (or nasd keeps for lookups by id)', []),
      branches: gauge('nas_branches', 'Branches of a Home, by state: live or expired (read-only, in their grace period)', ['home', 'state']),
      pending: gauge('nas_pending_changes', 'Changes written in a Home\'s branches and not committed yet', ['home']),
      used: gauge('nas_home_bytes_used', 'Bytes held in a Home\'s branches (their upper directories), what its quota bounds; the Store is nas_store_bytes', ['home']),
      storeObjects: gauge('nas_store_objects', 'Objects in a Home\'s Store, loose or packed (read at most once a minute)', ['home', 'where']),
      storeBytes: gauge('nas_store_bytes', 'Bytes of a Home\'s Store (main, history, records, the recycle area), loose or packed (read at most once a minute)', ['home', 'where']),
      remotePushed: gauge('nas_remote_last_push_timestamp_seconds', 'When nasd last mirrored a Home to a remote (nas remote add) without error (Unix time; absent: not since start)', ['home', 'remote']),
      remoteFailures: gauge('nas_remote_push_failures', 'Mirror pushes to a remote that failed since the last that succeeded (0: healthy)', ['home', 'remote']),
      quota: gauge('nas_home_quota_bytes', 'A Home\'s quota across its branches (.nas/limits.yaml home_quota_bytes)', ['home']),
      fullest: gauge('nas_branch_quota_fullest_ratio', 'The fullest branch of a Home: its bytes over its quota (1: writes get EDQUOT)', ['home']),
      trashItems: gauge('nas_trash_items', 'Entries in a Home\'s recycle area', ['home']),
      trashBytes: gauge('nas_trash_bytes', 'Bytes of what a Home\'s recycle area keeps', ['home']),
      prs: gauge('nas_prs', 'Agent PRs of a Home, by state', ['home', 'state']),
      decisions: gauge('nas_pr_owner_decisions', 'The owner\'s decisions recorded on a Home\'s PRs, all time: approve or reject', ['home', 'decision']),
      rate: gauge('nas_pr_approval_ratio', 'Approvals over the owner\'s decisions on a Home\'s PRs (absent before any decision)', ['home']),
      oldest: gauge('nas_pr_oldest_waiting_seconds', 'Age of the oldest PR waiting for a person (0: none waits)', ['home']),
      leases: gauge('nas_leases', 'Leases of a Home, by status', ['home', 'state']),
      runs: gauge('nas_runs', 'Runs of a Home, by state', ['home', 'state']),
      runExits: gauge('nas_runs_ended', 'Runs of a Home that ended, by exit status (0: succeeded; a number: the command failed with it; a name: a signal ended it)', ['home', 'exit']),
    };
  }

  set(s: StateSample): void {
    for (const g of this.all) g.reset();
    const { g } = this;
    if (s.kernelCache) {
      g.cache.labels('cache').set(s.kernelCache.hits);
      g.cache.labels('write').set(s.kernelCache.written);
      g.cache.labels('nasd').set(s.kernelCache.misses);
      g.nodes.set(s.kernelCache.nodes);
    }
    g.homes.labels('mounted').set(s.homes.length);
    g.homes.labels('archived').set(s.archived);
    for (const h of s.homes) {
      const home = h.home;
      g.branches.labels(home, 'live').set(h.branches - h.expiredBranches);
      g.branches.labels(home, 'expired').set(h.expiredBranches);
      g.pending.labels(home).set(h.pendingChanges);
      g.used.labels(home).set(h.bytesUsed);
      g.quota.labels(home).set(h.quotaBytes);
      g.fullest.labels(home).set(h.fullestBranch);
      g.trashItems.labels(home).set(h.trashItems);
      g.trashBytes.labels(home).set(h.trashBytes);
      for (const state of new Set([...PR_STATES, ...Object.keys(h.prs)])) g.prs.labels(home, state).set(h.prs[state] ?? 0);
      g.decisions.labels(home, 'approve').set(h.approved);
      g.decisions.labels(home, 'reject').set(h.rejected);
      if (h.approved + h.rejected > 0) g.rate.labels(home).set(h.approved / (h.approved + h.rejected));
      g.oldest.labels(home).set(h.oldestWaiting);
      for (const state of new Set([...LEASE_STATES, ...Object.keys(h.leases)])) g.leases.labels(home, state).set(h.leases[state] ?? 0);
      for (const state of new Set([...RUN_STATES, ...Object.keys(h.runs)])) g.runs.labels(home, state).set(h.runs[state] ?? 0);
      for (const [exit, n] of Object.entries(h.runExits)) g.runExits.labels(home, exit).set(n);
      if (h.store) {
        g.storeObjects.labels(home, 'loose').set(h.store.loose);
        g.storeObjects.labels(home, 'packed').set(h.store.packed);
        g.storeBytes.labels(home, 'loose').set(h.store.looseBytes);
        g.storeBytes.labels(home, 'packed').set(h.store.packBytes);
      }
      for (const r of h.remotes) {
        if (r.pushed !== undefined) g.remotePushed.labels(home, r.name).set(r.pushed / 1000);
        g.remoteFailures.labels(home, r.name).set(r.failures);
      }
    }
  }
}
