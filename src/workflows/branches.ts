import { UserError } from '../util/errors.js';
import { parseDuration } from '../util/duration.js';
import { validateRelPath } from '../util/names.js';
import type { BranchRecord, UnresolvedConflict } from '../home/home.js';
import { itemsFromGit } from '../trash/trash.js';
import type { Cluster } from '../cluster/cluster.js';
import type { HomeSet, Mounted } from '../homes/home-set.js';
import { mergeMainInto, takeSide, type BranchUpdate } from '../merge/update.js';
import type { Readers } from './readers.js';
import type { Credentials } from '../api/credentials.js';
import type { BranchCreated, BranchExtended, BranchListing, BranchResolved, BranchUpdated, Discarded, SyncResult } from '../api/types.js';
import type { BranchView } from '../cow/branch/branch-view.js';
import { mergedGraceMs, neverWritten, stillMerged } from './finished-work.js';

/** What becomes of a branch's undecided PRs when the branch goes (PrService.branchGone). */
export interface BranchPrs {
  branchGone(role: string, branch: string, why: string): Promise<unknown>;
}

/**
 * Branches through the control API: create (O(1): a ref, a record, an empty directory), list, extend, sync,
 * update (main merged into it), discard (its work to the recycle area), the periodic expiry pass (read-only
 * at the TTL, removed after the grace period, never both in one pass) and the removal of finished work (merged,
 * or a run's branch that held none: finished-work.ts). A branch that goes takes its undecided PRs with it.
 */
export class Branches {
  /** Branches being removed as finished (`<role>/<branch>`): the periodic pass and a run's end may meet on one. */
  private readonly finishing = new Set<string>();

  constructor(
    private readonly homes: HomeSet, private readonly readers: Readers, private readonly prs: BranchPrs,
    /** In a cluster, a branch name is one host's (src/cluster): claimed before a branch is made, given back when it goes. */
    private readonly cluster: Cluster | null = null,
  ) {}

  async createBranch(role: string, branch: string, opts: { from?: string; at?: string; ttl?: string; run?: string }): Promise<BranchCreated> {
    const m = this.homes.mounted(role);
    if (m.life.retired) throw new UserError(`Home ${role} is retired (its successor is ${m.life.retired.successor}): it takes no new branches`, 409);
    const max = m.config.limits.max_branches;
    if (m.branches.size >= max) {
      throw new UserError(`Home ${role} has ${m.branches.size} branches, the most its .nas/limits.yaml allows (max_branches: ${max}); ` +
        'discard one (nas branch discard) or raise the limit (nas home config)', 409);
    }
    const started = process.hrtime.bigint();
    const claimed = await this.cluster?.branchNames.claim(role, branch, { random: !!opts.run });
    let record;
    try {
      record = await m.home.createBranch(branch, { ...opts, defaultTtl: m.config.limits.branch_ttl_default });
    } catch (err) {
      if (claimed) await this.cluster?.branchNames.release(role, branch);
      throw err;
    }
    await this.homes.openBranch(m, record);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    return { ...record, home: role, view: `${role}@${branch}`, createdInMs: Math.round(ms * 100) / 100 };
  }

  async listBranches(role: string): Promise<BranchListing[]> {
    const m = this.homes.mounted(role);
    const records = await m.home.branches();
    return Promise.all(records.map(async ({ merged, ...r }) => {
      const view = m.branches.get(r.name);
      // Merged only while it holds nothing more: written since, it is live again (the next pass drops the mark).
      const done = merged && view && stillMerged(view, merged) ? { merged } : {};
      return { ...r, ...done, head: view?.head, expired: view?.expired ?? false, pending: view?.pendingChanges ?? 0, quota: view?.quota, bytes: await view?.bytesByClass() };
    })).then((here) => [...here, ...[...m.elsewhere].map(([name, v]) => ({
      name, from: '?', base: '?', created: '?', ttl: '?', expires: '?', head: v.head, expired: false, pending: 0, host: v.elsewhere,
    }))]);
  }

  /**
   * The owner gives a branch more time: it now expires `ttl` from now. An expired branch (in its grace period)
   * takes writes again and gets its scratch binds back; leases that ended with it stay ended, and its PR stays
   * expired (propose it again).
   */
  async extendBranch(role: string, branch: string, ttl: string): Promise<BranchExtended> {
    const m = this.homes.mounted(role);
    const view = this.homes.branch(role, branch);
    const record = m.records.get(branch);
    if (!record) throw new UserError(`${role}@${branch} has no branch record; it cannot be extended`, 409);
    const seconds = parseDuration(ttl);
    const { grace_from: _, ...kept } = record;
    const extended: BranchRecord = { ...kept, ttl, expires: new Date(Date.now() + seconds * 1000).toISOString() };
    await m.home.writeBranchRecord(extended);
    m.records.set(branch, extended);
    const reopened = view.expired;
    if (reopened) {
      view.reopen();
      await this.homes.bindScratch(view);
      this.homes.opts.log.info({ view: view.name, expires: extended.expires }, 'expired branch extended: writable again');
    }
    return { ...extended, view: view.name, reopened };
  }

  /** Commit everything pending in one branch (or all of a Home's) and report the heads. */
  async sync(role: string, branch?: string): Promise<SyncResult> {
    const m = this.homes.mounted(role);
    const views = branch ? [this.homes.branch(role, branch)] : [...m.branches.values()];
    for (const v of views) await v.sync();
    return Object.fromEntries(views.map((v) => [v.name, v.head]));
  }

  /**
   * Bring main into a branch (`nas branch update`): what is pending is committed, then main is merged into the
   * branch as a commit on it with two parents (the branch's head, main's), and the view shows it at once. Files
   * both changed in the same lines hold both versions between conflict markers and are listed; the branch cannot
   * be proposed while they do (merge/update.ts). An expired branch takes no update. Main's side of a conflict is
   * written into the branch only where the caller could read it through main's view: an update is no way around
   * main's modes.
   */
  async updateBranch(role: string, branch: string, creds: Credentials): Promise<BranchUpdated> {
    const m = this.homes.mounted(role);
    const view = this.homes.branch(role, branch);
    if (view.expired) throw new UserError(`${view.name} expired (its TTL passed): it takes no changes, main included; the owner can extend it (nas branch extend)`, 409);
    const main = await m.home.mainHead();
    const who = await this.readers.of(role, creds);
    const mayReadMain = this.readers.mayRead(who, m.home.store, this.homes.viewShare(role));
    let outcome = { kind: 'up-to-date' } as BranchUpdate;
    const commit = await view.advance(async (head) => {
      outcome = await mergeMainInto(m.home.store, { head, main, branch, rules: view.rules, author: m.home.identity, mayReadMain });
      return outcome.kind === 'merged' ? outcome.commit : null;
    });
    const conflicts = outcome.kind === 'merged' ? outcome.conflicts : [];
    if (outcome.kind === 'merged') {
      const open = conflicts.filter((c) => c.unresolved).map((c): UnresolvedConflict => ({ path: c.path, main, why: c.why ?? '' }));
      if (open.length > 0) await this.setUnresolved(m, branch, (was) => [...was.filter((u) => !open.some((o) => o.path === u.path)), ...open]);
      this.homes.opts.log.info({ view: view.name, main, commit, conflicts: conflicts.length, unresolved: open.length }, 'main merged into the branch');
    }
    return { view: view.name, head: commit ?? view.head, main, upToDate: outcome.kind === 'up-to-date', conflicts };
  }

  /**
   * A person picks the side that stays of a file an update left unresolved (`nas branch resolve`): main's
   * version (with its record) or the branch's as it is now. The side that loses goes to the recycle area, and
   * once nothing is left unresolved the branch can be proposed. Taking main's side needs the right to read it
   * through main's view.
   */
  async resolveBranch(role: string, branch: string, file: string, side: string, creds: Credentials): Promise<BranchResolved> {
    if (side !== 'main' && side !== 'branch') throw new UserError(`--take must be branch or main, not ${JSON.stringify(side)}`, 400);
    const take: 'main' | 'branch' = side;
    const path = validateRelPath(file);
    const m = this.homes.mounted(role);
    const view = this.homes.branch(role, branch);
    const open = m.records.get(branch)?.unresolved ?? [];
    const conflict = open.find((u) => u.path === path);
    if (!conflict) {
      const listed = open.length ? `; unresolved: ${open.map((u) => u.path).join(', ')}` : '; nothing is';
      throw new UserError(`${path} is not unresolved in ${view.name}${listed}`, 404);
    }
    if (take === 'main') {
      const mayReadMain = this.readers.mayRead(await this.readers.of(role, creds), m.home.store, this.homes.viewShare(role));
      const mainTree = (await m.home.store.readCommit(conflict.main)).tree;
      if (mayReadMain && !(await mayReadMain(mainTree, path))) {
        throw new UserError(`main's version of ${path} is not yours to read through main's view, so you cannot take it; the Home's owner can`, 403);
      }
    }
    let taken: Awaited<ReturnType<typeof takeSide>> | undefined;
    const head = await view.advance(async (at) => {
      taken = await takeSide(m.home.store, { head: at, main: conflict.main, path, take, branch, author: m.home.identity });
      return taken.commit;
    });
    const lost = taken?.lost ?? null;
    // With its record (mode, owner): the recycle area shows it, and restores it, only to whom it showed before.
    if (lost) await m.home.trash.add(await itemsFromGit(m.home.store, [{ path, entry: lost }], branch, view.run, taken!.lostIn));
    const left = await this.setUnresolved(m, branch, (was) => was.filter((u) => u.path !== path));
    this.homes.opts.log.info({ view: view.name, path, took: take, recycled: !!lost }, 'conflict resolved');
    return { view: view.name, path, took: take, head: head ?? view.head, recycled: !!lost, unresolved: left.map((u) => u.path) };
  }

  /** Change the list of a branch's unresolved files in its record; the list left. */
  private async setUnresolved(m: Mounted, branch: string, change: (was: UnresolvedConflict[]) => UnresolvedConflict[]): Promise<UnresolvedConflict[]> {
    const record = m.records.get(branch);
    if (!record) throw new UserError(`${m.home.role}@${branch} has no branch record; its conflicts cannot be kept`, 409);
    const { unresolved: was = [], ...rest } = record;
    const now = change(was);
    const next: BranchRecord = now.length > 0 ? { ...rest, unresolved: now } : rest;
    await m.home.writeBranchRecord(next);
    m.records.set(branch, next);
    return now;
  }

  /**
   * Discard a branch (a parallel attempt that lost): its work since it forked from main goes to the recycle
   * area, then its view, ref, record and directory go. Scratch (workspace/) goes with it, as documented.
   */
  async discardBranch(role: string, branch: string, why = `its branch ${branch} was discarded`): Promise<Omit<Discarded, 'revokedLeases'>> {
    const m = this.homes.mounted(role);
    const view = this.homes.branch(role, branch);
    const key = `${role}/${branch}`;
    if (this.finishing.has(key)) throw new UserError(`${view.name} is being removed already (its work merged, or it never held any)`, 409);
    // Taken before the first await: a finished-branch pass (or a second discard) cannot close it meanwhile.
    this.finishing.add(key);
    try {
      await this.close(m, branch, view, `${view.name} was discarded: its work is in the recycle area (nas trash list ${role})`);
      const store = m.home.store;
      const head = view.head;
      const fork = await store.mergeBase(head, await m.home.mainHead());
      const tree = async (c: string | null) => (c ? (await store.readCommit(c)).tree : null);
      const headTree = (await tree(head))!;
      const work = (await store.fileChanges(await tree(fork), headTree)).filter((c) => c.after);
      await m.home.trash.add(await itemsFromGit(store, work.map((c) => ({ path: c.path, entry: c.after! })), branch, view.run, headTree));
      await this.remove(m, branch, why);
      return { discarded: view.name, head, recycled: work.map((c) => c.path) };
    } finally {
      this.finishing.delete(key);
    }
  }

  /**
   * Out of the mount (scratch binds first), then what is pending committed: nothing can land after the work is
   * counted. What is still open in it is dead from here on (EIO, saying `dead`), as a revoked lease's descriptors
   * are refused: a write now would land after its work was counted, and be dropped with a success. A close that
   * fails leaves the branch as it was: its view, its record (expiry and extend read it) and its scratch bind.
   */
  private async close(m: Mounted, branch: string, view: BranchView, dead: string): Promise<void> {
    await this.homes.unbindScratch(view);
    const record = m.records.get(branch);
    m.branches.delete(branch);
    m.records.delete(branch);
    view.discarding(dead);
    try {
      await view.close();
    } catch (err) {
      view.discarding(null);
      m.branches.set(branch, view);
      if (record) m.records.set(branch, record);
      await this.homes.bindScratch(view);
      throw err;
    }
  }

  /**
   * In a cluster, a branch goes to another host (nas branch move, cluster/branch-move.ts): out of the mount and
   * what is pending committed, its head pushed (`push`), then its ref, record and directory go here. Its PRs
   * stay: they are the Home's writer's. A push that fails leaves the branch here as it was.
   */
  async handOver(role: string, branch: string, push: (head: string) => Promise<void>): Promise<{ head: string; ttl: string }> {
    const m = this.homes.mounted(role);
    const view = this.homes.branch(role, branch);
    const record = m.records.get(branch);
    await this.close(m, branch, view, `${view.name} moved to another host: write in it there`);
    try {
      await push(view.head);
    } catch (err) {
      if (record) await this.homes.openBranch(m, record);
      throw err;
    }
    await m.home.removeBranch(branch);
    await this.homes.viewsChanged(role);
    return { head: view.head, ttl: record?.ttl ?? '48h' };
  }

  /** A branch another host handed over: made here at its head (its name is this host's already). */
  async takeOver(role: string, branch: string, head: string, ttl: string): Promise<void> {
    const m = this.homes.mounted(role);
    await this.homes.openBranch(m, await m.home.createBranch(branch, { at: head, ttl, defaultTtl: m.config.limits.branch_ttl_default }));
    await this.homes.viewsChanged(role);
  }

  /**
   * In a cluster, a branch another host took by force while this one was away (nas branch move --force, cluster/
   * branch-move.ts): its copy here goes. What it held that this host never pushed (its head is not `pushed`) is
   * kept as a branch `keepAs` of this host's, so nothing is lost. The kept name, or null.
   */
  async leftBehind(role: string, branch: string, pushed: string | undefined, keepAs: string): Promise<string | null> {
    const m = this.homes.mounted(role);
    const view = this.homes.branch(role, branch);
    const ttl = m.records.get(branch)?.ttl ?? '48h';
    // The name is taken before anything closes (a refusal leaves the branch as it was), and given back if unused.
    await this.cluster?.branchNames.claim(role, keepAs, { random: false });
    await this.close(m, branch, view, `${view.name} moved to another host while this one was away: write in it there`);
    const kept = view.head !== pushed ? keepAs : null;
    if (kept) await this.homes.openBranch(m, await m.home.createBranch(kept, { at: view.head, ttl, defaultTtl: m.config.limits.branch_ttl_default }));
    else await this.cluster?.branchNames.release(role, keepAs);
    await m.home.removeBranch(branch);
    await this.homes.viewsChanged(role);
    return kept;
  }

  /** The branch's ref, record and directory go (its view is closed), and with them its PRs still undecided. */
  private async remove(m: Mounted, branch: string, why: string): Promise<void> {
    await m.home.removeBranch(branch);
    await this.cluster?.branchNames.release(m.home.role, branch);
    await this.homes.viewsChanged(m.home.role);
    await this.prs.branchGone(m.home.role, branch, why);
  }

  /**
   * The periodic pass over merged branches: one written since its merge is live again (the mark dropped); one
   * past the Home's merged_branch_grace (a run's at once) is removed, its leases ended by `removed`.
   */
  async sweepMerged(hooks: { removed(role: string, branch: string): Promise<void> }): Promise<void> {
    const now = await this.homes.clock.now();
    for (const m of [...this.homes.all()]) {
      for (const [branch, record] of [...m.records]) {
        const view = m.branches.get(branch);
        const mark = record.merged;
        if (!view || !mark) continue;
        // A run still in flight may have proposed itself: its branch goes at the run's end (removeRunBranch).
        if (this.homes.runs.all().some((r) => r.role === m.home.role && r.branch === branch)) continue;
        const grace = mergedGraceMs(record, m.config.limits);
        if (stillMerged(view, mark) && (grace === null || now < Date.parse(mark.at) + grace)) continue;
        if (await this.removeMerged(m, branch, view)) await hooks.removed(m.home.role, branch);
      }
    }
  }

  /**
   * A run's branch at the run's end (its lease ended): removed when its PR merged or when the run never wrote
   * anything; what is said of it, or null when it stays.
   */
  async removeRunBranch(role: string, branch: string): Promise<string | null> {
    const m = this.homes.mounted(role);
    const view = m.branches.get(branch);
    const record = m.records.get(branch);
    if (!view || !record) return null;
    if (record.merged) return (await this.removeMerged(m, branch, view)) ? `its branch ${branch} was removed: its work is on main (PR ${record.merged.pr})` : null;
    const unchanged = (v: BranchView) => neverWritten(v, record);
    const outcome = await this.removeFinished(m, branch, view, unchanged, 'changed nothing', `its branch ${branch} was removed: the run that made it changed nothing`);
    return outcome === 'removed' ? `it changed nothing: its branch ${branch} was removed` : null;
  }

  /** A merged branch goes when it still holds only what merged; written since, its mark is dropped. True when removed. */
  private async removeMerged(m: Mounted, branch: string, view: BranchView): Promise<boolean> {
    const mark = m.records.get(branch)?.merged;
    if (!mark) return false;
    const merged = (v: BranchView) => stillMerged(v, mark);
    const outcome = await this.removeFinished(m, branch, view, merged, `merged (PR ${mark.pr})`, `its branch ${branch} was removed after it merged as PR ${mark.pr}`);
    if (outcome === 'written') await this.clearMerged(m, branch);
    return outcome === 'removed';
  }

  /**
   * Remove a branch whose work is all on main, or that never held any: nothing goes to the recycle area (its
   * scratch goes with it, as with discard). It turns read-only first, what is pending committed, and is looked
   * at again: a write that landed meanwhile keeps it (writable again). `busy`: another removal has it.
   */
  private async removeFinished(
    m: Mounted, branch: string, view: BranchView, finished: (v: BranchView) => boolean, what: string, why: string,
  ): Promise<'removed' | 'written' | 'busy'> {
    const key = `${m.home.role}/${branch}`;
    if (this.finishing.has(key) || m.branches.get(branch) !== view) return 'busy';
    if (!finished(view)) return 'written';
    this.finishing.add(key);
    try {
      const wasExpired = view.expired;
      if (!wasExpired) {
        await this.homes.unbindScratch(view);
        await view.expire(`${view.name} ${what}: it is being removed`);
      }
      if (!finished(view)) {
        if (!wasExpired) {
          view.reopen();
          await this.homes.bindScratch(view);
        }
        return 'written';
      }
      await this.close(m, branch, view, `${view.name} was removed: ${why}`);
      await this.remove(m, branch, why);
    } finally {
      this.finishing.delete(key);
    }
    this.homes.opts.log.info({ view: view.name, head: view.head, why: what }, 'finished branch removed (nothing to recycle)');
    return 'removed';
  }

  /** A merged branch took writes after its merge: live again, its mark dropped. */
  private async clearMerged(m: Mounted, branch: string): Promise<void> {
    const record = m.records.get(branch);
    if (!record?.merged) return;
    const { merged, ...live } = record;
    m.records.set(branch, live);
    await m.home.writeBranchRecord(live);
    this.homes.opts.log.info({ view: `${m.home.role}@${branch}`, pr: merged.pr }, 'merged branch took writes after its merge: live again');
  }

  /**
   * Branches whose TTL passed: each is made read-only (what was pending committed first, its workspace/ bind
   * undone so scratch is read-only too), `expired` is called once for it and the time is kept in its record
   * (`grace_from`). In a later pass, once the Home's `branch_grace` has passed since then, its work goes to the
   * recycle area and the branch is removed (`discarded` is called): never in the pass that expired it, and when
   * the wall clock jumped forward since the last pass every expired branch's grace period starts again, so a
   * clock that jumps past a TTL and a grace period at once leaves the branch (and its scratch) a full grace period.
   * Runs in the periodic pass; a restart re-finds what expired meanwhile.
   */
  async expireBranches(hooks: { expired(role: string, branch: string): Promise<void>; discarded(role: string, branch: string): Promise<void> }): Promise<void> {
    const { now, jumped } = await this.homes.clock.read();
    if (jumped > 0) await this.restartGrace(now, jumped);
    // The record is read again at each step: an owner's extend may land while this pass awaits.
    const due = (m: Mounted, branch: string) => {
      const record = m.records.get(branch);
      return record && Date.parse(record.expires) <= now ? record : undefined;
    };
    for (const m of [...this.homes.all()]) {
      const role = m.home.role;
      for (const branch of [...m.records.keys()]) {
        const view = m.branches.get(branch);
        let record = due(m, branch);
        if (!view || !record) continue;
        if (!view.expired) {
          await this.homes.unbindScratch(view);
          await view.expire(`${view.name} expired at ${record.expires} (ttl ${record.ttl}); it is read-only until it is removed`);
          this.homes.opts.log.warn({ view: view.name, expires: record.expires, ttl: record.ttl }, 'branch expired: read-only now');
          // Kept across restarts: a branch expired before one is expired again at start, its grace period running on.
          if (!record.grace_from) await this.setGraceFrom(m, record, now);
          await hooks.expired(role, branch);
          continue;
        }
        let grace: number;
        try {
          grace = parseDuration(m.config.limits.branch_grace) * 1000;
        } catch {
          continue;
        }
        record = due(m, branch);
        if (!record?.grace_from || now < Date.parse(record.grace_from) + grace) continue;
        await this.discardBranch(role, branch, `its branch ${branch} was removed after its grace period`);
        this.homes.opts.log.warn({ view: view.name, grace: m.config.limits.branch_grace, since: record.grace_from }, 'expired branch removed after its grace period; its work is in the recycle area');
        await hooks.discarded(role, branch);
      }
    }
  }

  /** The wall clock jumped forward: every expired branch gets a full grace period from now before it is removed. */
  private async restartGrace(now: number, jumped: number): Promise<void> {
    const postponed: string[] = [];
    for (const m of this.homes.all()) {
      for (const [branch, view] of m.branches) {
        const record = m.records.get(branch);
        if (!view.expired || !record) continue;
        await this.setGraceFrom(m, record, now);
        postponed.push(view.name);
      }
    }
    this.homes.opts.log.warn({ jumpedMs: jumped, postponed }, 'the wall clock jumped forward: expired branches keep a full grace period from now');
  }

  private async setGraceFrom(m: Mounted, record: BranchRecord, now: number): Promise<void> {
    // The record as it is now (an extend may have replaced it), noted before the write: an extend drops it.
    const current = m.records.get(record.name);
    if (!current) return;
    const updated = { ...current, grace_from: new Date(now).toISOString() };
    m.records.set(record.name, updated);
    await m.home.writeBranchRecord(updated);
  }
}
