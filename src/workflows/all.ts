import type { Logger } from 'pino';
import type { HomeSet } from '../homes/home-set.js';
import { Branches } from './branches.js';
import { HistoryService } from './history.js';
import { Homes } from './homes.js';
import { LeaseService } from './leases.js';
import { LifecycleService } from './lifecycle.js';
import { MaintenanceService } from './maintenance.js';
import { MemoryService } from './memory.js';
import { PrService } from './prs.js';
import { Readers } from './readers.js';
import { Replicator } from './remotes.js';
import { RunService, type RunSockets } from './runs.js';
import { TrashWorkflow } from './trash.js';
import { WhyService } from './why.js';
import { Refusals } from '../homes/refusals.js';
import type { CheckDirs } from '../merge/check-sandbox.js';
import type { Cluster } from '../cluster/cluster.js';

/**
 * Every workflow of the control API, one per route family, over the open Homes. Who may call a route is the
 * contract's (`who` in api/contract.ts), checked before the handler runs; a workflow checks the caller itself only
 * where the contract says `{ workflow }` (issuing a lease, proposing, a checkpoint, a restore from history or the
 * recycle area).
 */
export interface Workflows {
  branches: Branches;
  trash: TrashWorkflow;
  homes: Homes;
  leases: LeaseService;
  memory: MemoryService;
  prs: PrService;
  runs: RunService;
  history: HistoryService;
  maintenance: MaintenanceService;
  lifecycle: LifecycleService;
  remotes: Replicator;
  why: WhyService;
  /** This host's part in a cluster (nasd.yaml cluster:), or null on a host alone. */
  cluster: Cluster | null;
  /** nasd's log (the control API's line per change). */
  log: Logger;
}

/** Wire the workflows to each other (each is given what it calls, nothing more). */
/** `refusals`: what the mount refused, as fuse-ops keeps it (nas why). */
export function openWorkflows(
  homes: HomeSet,
  o: { stateDir: string; runsDir: string; checkDirs: CheckDirs; runSockets: RunSockets; log: Logger; refusals?: Refusals; cluster?: Cluster | null },
): Workflows {
  const leases = new LeaseService(homes, o.stateDir, o.log);
  const readers = new Readers(homes, leases);
  const prs = new PrService(homes, leases, readers, o.log, o.checkDirs, o.cluster ?? null);
  const branches = new Branches(homes, readers, prs, o.cluster ?? null);
  const trash = new TrashWorkflow(homes, leases, readers);
  const homeFlows = new Homes(homes, branches);
  const memory = new MemoryService(homes, readers, branches, prs);
  return {
    branches, trash, homes: homeFlows, leases, memory, prs,
    runs: new RunService(homes, branches, leases, prs, memory, o.runSockets, o.runsDir, o.stateDir, o.log),
    history: new HistoryService(homes, branches, leases, prs, readers, o.stateDir),
    maintenance: new MaintenanceService(homes, branches, trash, leases, prs, o.log),
    lifecycle: new LifecycleService(homes, homeFlows, branches, leases, prs),
    remotes: new Replicator(homes, o.log),
    why: new WhyService(o.refusals ?? new Refusals(), homes, leases),
    cluster: o.cluster ?? null,
    log: o.log,
  };
}
