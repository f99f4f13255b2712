import type { Logger } from 'pino';
import type { MaintenanceReport, TrashPurged } from '../api/types.js';
import type { LeaseService } from './leases.js';
import type { PrService } from './prs.js';
import type { HomeSet } from '../homes/home-set.js';
import type { Branches } from './branches.js';
import type { TrashWorkflow } from './trash.js';
import { meter } from '../metrics/meter.js';

/**
 * Keeping Homes tidy: branch TTLs (every few seconds), the recycle area's window (hourly, with `git gc --auto`),
 * and `nas maintenance run` (daily, from the systemd timer, or by hand): all of that plus stale PRs and a full
 * pack of the Store, reported. Nothing reachable from main, a live branch, a checkpoint or the recycle window
 * is removed: git prunes only unreachable objects, and only those older than the window.
 */
export class MaintenanceService {
  /** The TTL pass running now, if one is. */
  private expiring: Promise<Map<string, string[]>> | null = null;
  /** One maintenance run at a time: a second waits for the first. */
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly homes: HomeSet,
    private readonly branches: Branches,
    private readonly trash: TrashWorkflow,
    private readonly leases: LeaseService,
    private readonly prs: PrService,
    private readonly log: Logger,
  ) {}

  /**
   * Branches whose TTL passed turn read-only, their leases end and their waiting PRs expire; past the grace
   * period they go to the recycle area. Merged branches past merged_branch_grace are removed. Returns the branches removed, by Home. A pass already running is not
   * doubled: the periodic tick skips this one; `wait` (nas maintenance run) waits for it, then makes its own.
   */
  async expireBranches(opts: { wait?: boolean } = {}): Promise<Map<string, string[]>> {
    while (this.expiring) {
      if (!opts.wait) return new Map();
      await this.expiring;
    }
    const pass = this.expireNow();
    this.expiring = pass;
    try {
      return await pass;
    } finally {
      this.expiring = null;
    }
  }

  private async expireNow(): Promise<Map<string, string[]>> {
    const discarded = new Map<string, string[]>();
    try {
      await this.branches.expireBranches({
        expired: async (role, branch) => {
          await this.homes.viewsChanged(role);
          await this.leases.revokeBranch(role, branch);
          await this.leases.apply(role);
          await this.prs.expireBranch(role, branch);
        },
        discarded: async (role, branch) => {
          await this.homes.viewsChanged(role);
          await this.leases.revokeBranch(role, branch);
          discarded.set(role, [...(discarded.get(role) ?? []), branch]);
        },
      });
    } catch (err) {
      this.log.error({ err }, 'cannot expire branches');
    }
    try {
      // Finished work leaves: merged branches past their grace go (their work is on main), their leases with them.
      await this.branches.sweepMerged({ removed: (role, branch) => this.leases.revokeBranch(role, branch).then(() => undefined) });
    } catch (err) {
      this.log.error({ err }, 'cannot remove merged branches');
    }
    return discarded;
  }

  /** Purge a Home's recycle area (owner only), then let git pack what is loose when it finds it worth it. */
  async purgeTrash(role: string, olderThan: string | undefined): Promise<TrashPurged> {
    const purged = await this.trash.trashPurge(role, olderThan);
    this.gcSoon(role);
    return purged;
  }

  /** The hourly pass: every Home's recycle area keeps its trash_keep_days. */
  async hourly(): Promise<void> {
    for (const role of this.homes.roles()) {
      try {
        meter.purged((await this.trash.trashPurge(role)).purged.length);
        this.gcSoon(role);
      } catch (err) {
        this.log.error({ err, role }, 'maintenance failed');
      }
    }
  }

  private gcSoon(role: string): void {
    void this.homes.homeOf(role).store.gc().then(
      () => meter.gc('auto', true),
      (err) => {
        meter.gc('auto', false);
        this.log.warn({ err, role }, 'git gc failed');
      },
    );
  }

  /** `nas maintenance run [<role>]` (owner): everything, for one Home or all, with what it did. */
  run(role: string | undefined): Promise<MaintenanceReport[]> {
    const roles = role ? [this.homes.homeOf(role).role] : this.homes.roles();
    const pass = this.running.then(() => this.runNow(roles)).catch((err) => {
      meter.maintenanceFailed();
      throw err;
    });
    this.running = pass.catch(() => undefined);
    return pass;
  }

  private async runNow(roles: string[]): Promise<MaintenanceReport[]> {
    const discarded = await this.expireBranches({ wait: true });
    const reports: MaintenanceReport[] = [];
    for (const role of roles) {
      const started = process.hrtime.bigint();
      const store = this.homes.homeOf(role).store;
      const before = await store.objectCounts();
      const { cutoff, purged } = await this.trash.trashPurge(role);
      const expiredPrs = await this.prs.expireStale(role, ['main', ...this.homes.branchNames(role)]);
      const keepDays = (await this.homes.snapshot(role)).config.maintenance.trash_keep_days;
      await store.pack(keepDays * 86400).then(() => meter.gc('pack', true), (err) => {
        meter.gc('pack', false);
        throw err;
      });
      const report: MaintenanceReport = {
        role, cutoff, purged: purged.length, discarded: discarded.get(role) ?? [], expiredPrs,
        objects: { before, after: await store.objectCounts() }, ms: Math.round(Number(process.hrtime.bigint() - started) / 1e6),
      };
      this.log.info({ ...report }, 'maintenance done');
      meter.maintained({ purged: report.purged, expiredPrs: expiredPrs.length, seconds: report.ms / 1000 });
      reports.push(report);
    }
    return reports;
  }
}
