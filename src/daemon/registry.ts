import fs from 'node:fs/promises';
import type { Logger } from 'pino';
import { fsError, UserError } from '../util/errors.js';
import { parseDuration } from '../util/duration.js';
import type { Caller } from '../util/owner.js';
import { validateBranch, validateRelPath, validateRole } from '../util/names.js';
import type { Identity } from '../store/store.js';
import { Home, type BranchRecord } from '../home/home.js';
import { Checkpoints } from '../home/checkpoints.js';
import { exportHome, importHome, IMPORTING } from '../home/portable.js';
import { Lifecycle, listArchived, moveFromArchive, moveToArchive, archiveDirFor, type LifecycleRecord } from '../home/lifecycle.js';
import { Store } from '../store/store.js';
import { LeaseStore } from '../lease/lease-store.js';
import { MAIN_REF } from '../store/refs.js';
import { scratchRoots, type HomeConfig } from '../config/home-config.js';
import { branchRef } from '../store/refs.js';
import type { ScratchBinds } from '../fuse-ops/scratch-binds.js';
import { compileRules } from '../policy/policy.js';
import { GitLayer } from '../cow/git-layer.js';
import { MainView } from '../cow/main-view.js';
import { BranchView } from '../cow/branch/branch-view.js';
import type { Owner } from '../cow/attr.js';
import type { FsStats, View } from '../cow/view.js';
import { itemsFromGit, type TrashRecord } from '../trash/trash.js';
import { Space } from '../cow/branch/space.js';
import type { Exported, Imported, BranchCreated, BranchExtended, BranchListing, Discarded, HomeSummary, StatusReport, SyncResult, TrashPurged, TrashRestored } from '../api/types.js';
import { RunTracker } from './run-tracker.js';
import { WallClock } from '../util/clock.js';

export interface RegistryOptions {
  stateDir: string;
  /** Where the views are mounted: paths printed for agents (nas context) start here. */
  mount: string;
  identity: Identity;
  owner: Owner;
  windowMs: number;
  log: Logger;
  /** Named Home templates (`nas home create --template <name>`). */
  templatesDir?: string;
  /** Binds each branch's scratch roots over its view once the mount is up (absent: scratch goes through FUSE). */
  binds?: ScratchBinds;
  /** The clock branch TTLs and grace periods are read on (default: the wall clock). */
  clock?: WallClock;
}

export interface Snapshot {
  home: Home;
  config: HomeConfig;
  /** The view's name under the mount root, and its path. */
  name: string;
  path: string;
  commit: string;
  mainHead: string;
  /** For a branch: its view (for writes). */
  view?: BranchView;
}

interface Mounted {
  home: Home;
  config: HomeConfig;
  main: MainView;
  branches: Map<string, BranchView>;
  /** Each open branch's record (its TTL). */
  records: Map<string, BranchRecord>;
  /** Read-only views of the Home's checkpoints, by checkpoint name (`<role>:<name>` under the mount root). */
  checkpoints: Map<string, MainView>;
  /** Read-only views of commits looked up by id (`<role>:<commit>`), the most recently used last. */
  commits: Map<string, MainView>;
  /** The Home's quota across all branches: every branch's Space adds to it. */
  pool: Space;
  /** Retired (and its successor), or the Home it succeeds. */
  life: LifecycleRecord;
}

/** A commit id (or an unambiguous prefix of one) under the mount root: `<role>:<7 to 40 hex digits>`. */
const COMMIT_ID = /^[0-9a-f]{7,40}$/;
/** Commit views kept per Home; the least recently used goes first (it is looked up again when named). */
const COMMIT_VIEWS = 32;

/**
 * Every Home and its views, by the name that appears under the mount root: `<role>` for main,
 * `<role>@<branch>` for a branch. The control API and the FUSE adapter both go through here.
 */
export class Registry {
  private readonly homes = new Map<string, Mounted>();
  /** Archived Homes: kept, not mounted. */
  private readonly archived = new Map<string, HomeSummary>();
  /** The runs in flight, by PID namespace: whose process a request comes from. */
  readonly runs = new RunTracker();
  private refreshing: Promise<unknown> = Promise.resolve();
  private readonly clock: WallClock;

  constructor(private readonly opts: RegistryOptions) {
    this.clock = opts.clock ?? new WallClock();
  }

  /** Open every Home in the state directory and every branch, recovering what a crash left. */
  async load(): Promise<void> {
    for (const role of await Home.list(this.opts.stateDir)) {
      try {
        await this.mount(await Home.open(this.opts.stateDir, role, this.opts.identity));
      } catch (err) {
        this.opts.log.error({ err, role }, 'cannot open Home; it is not mounted');
      }
    }
    for (const role of await listArchived(this.opts.stateDir)) await this.noteArchived(role);
  }

  private async noteArchived(role: string): Promise<void> {
    const store = archiveDirFor(this.opts.stateDir, role);
    const main = (await (await Store.open(store)).readRef(MAIN_REF).catch(() => null)) ?? '';
    this.archived.set(role, { role, store, main, branches: [], problems: [], state: 'archived' });
  }

  private async mount(home: Home): Promise<Mounted> {
    const head = await home.mainHead();
    const config = await home.config(head);
    for (const problem of config.problems) this.opts.log.warn({ role: home.role, problem }, 'Home metadata problem; defaults apply');
    const main = new MainView(home.role, new GitLayer(home.store, await home.store.readCommit(head)), this.opts.owner, scratchRoots(config.maintenance));
    const mounted: Mounted = {
      home, config, main, branches: new Map(), records: new Map(), checkpoints: new Map(), commits: new Map(),
      pool: new Space(config.limits.home_quota_bytes),
      life: await new Lifecycle(home.store, home.identity).get(),
    };
    this.homes.set(home.role, mounted);
    for (const b of await home.branches()) await this.openBranch(mounted, b);
    for (const c of await new Checkpoints(home.store, home.identity).list()) await this.showCheckpoint(home.role, c.name, c.commit);
    return mounted;
  }

  /**
   * A checkpoint shows as `<role>:<name>` under the mount root, read-only (':' is in no role or branch name, so
   * it cannot collide); it goes when the checkpoint is deleted.
   */
  async showCheckpoint(role: string, name: string, commit: string | null): Promise<void> {
    const m = this.need(role);
    if (!commit) return void m.checkpoints.delete(name);
    const layer = new GitLayer(m.home.store, await m.home.store.readCommit(commit));
    const view = new MainView(`${role}:${name}`, layer, this.opts.owner, []);
    m.checkpoints.set(name, view);
  }

  private async openBranch(m: Mounted, record: BranchRecord): Promise<BranchView> {
    // Rules come from the branch's own head: .nas/ is read-only in a branch, so they are main's as of the fork.
    const head = await m.home.store.readRef(branchRef(record.name));
    const config = head ? await m.home.config(head) : m.config;
    const view = await BranchView.open(
      {
        role: m.home.role,
        branch: record.name,
        store: m.home.store,
        trash: m.home.trash,
        identity: this.opts.identity,
        owner: this.opts.owner,
        rules: compileRules(config.policy, config.maintenance),
        quotaBytes: config.limits.branch_quota_bytes,
        homeSpace: m.pool,
        runId: record.run,
        base: record.base,
        dir: m.home.branchDir(record.name),
        windowMs: this.opts.windowMs,
        log: this.opts.log,
      },
      scratchRoots(config.maintenance),
    );
    m.branches.set(record.name, view);
    m.records.set(record.name, record);
    for (const b of this.scratchBinds(view)) await this.opts.binds?.bind(b.source, b.target);
    return view;
  }

  /** Where each scratch root of a branch view lives on disk, and where it shows under the mount. */
  private scratchBinds(view: BranchView): { source: string; target: string }[] {
    return view.scratchDirs().map(({ name, dir }) => ({ source: dir, target: `${this.opts.mount}/${view.name}/${name}` }));
  }

  /** Every scratch bind of every open branch view (made once the FUSE mount is up). */
  allScratchBinds(): { source: string; target: string }[] {
    return [...this.homes.values()].flatMap((m) => [...m.branches.values()].flatMap((v) => this.scratchBinds(v)));
  }

  // ---- routing (FUSE) ----------------------------------------------------------------------------

  /** Names under the mount root. */
  rootNames(): string[] {
    const names: string[] = [];
    for (const [role, m] of this.homes) {
      names.push(role);
      for (const branch of m.branches.keys()) names.push(`${role}@${branch}`);
      for (const checkpoint of m.checkpoints.keys()) names.push(`${role}:${checkpoint}`);
    }
    return names;
  }

  /**
   * The view a top-level name stands for, or undefined. `<role>@main` is main too: inside a run,
   * `/agents/<role>` is the run's branch and main stays reachable under that name (it is not listed).
   */
  view(name: string): View | undefined {
    const colon = name.indexOf(':');
    if (colon > 0) {
      const m = this.homes.get(name.slice(0, colon));
      const spec = name.slice(colon + 1);
      const checkpoint = m?.checkpoints.get(spec);
      if (checkpoint || !m) return checkpoint;
      const commit = m.commits.get(spec);
      if (commit) {
        // The least recently used commit view is the one that goes: this one moves to the end.
        m.commits.delete(spec);
        m.commits.set(spec, commit);
      }
      return commit;
    }
    const at = name.indexOf('@');
    const m = this.homes.get(at < 0 ? name : name.slice(0, at));
    if (!m) return undefined;
    const branch = name.slice(at + 1);
    return at < 0 || branch === 'main' ? m.main : m.branches.get(branch);
  }

  /**
   * Make `<role>:<commit>` a view when it names a commit of the Home (a lookup of a name not listed): history
   * is browsable by commit id, read-only, as checkpoints are. Checkpoint names never look like commit ids.
   */
  async resolve(name: string): Promise<void> {
    const colon = name.indexOf(':');
    if (colon < 0) return;
    const m = this.homes.get(name.slice(0, colon));
    const spec = name.slice(colon + 1);
    if (!m || m.checkpoints.has(spec) || m.commits.has(spec) || !COMMIT_ID.test(spec)) return;
    const commit = await m.home.store.findCommit(spec);
    if (!commit || m.commits.has(spec)) return;
    const view = new MainView(name, new GitLayer(m.home.store, await m.home.store.readCommit(commit)), this.opts.owner, []);
    m.commits.set(spec, view);
    for (const old of m.commits.keys()) {
      if (m.commits.size <= COMMIT_VIEWS) break;
      m.commits.delete(old);
    }
  }

  /**
   * A run's processes reach two views: their own branch and their Home's main, where every read goes into the
   * run's manifest (readerOf). Any other view is EACCES: another branch (another run's, or one the run's user
   * holds a lease on), another Home, history views (any commit could be another run's work); reads there would
   * escape the manifest, and a PR that read the inbox that way would still merge by policy.
   */
  admit(view: View, caller: () => Caller | null): void {
    const run = this.runs.runOf(caller()?.pid ?? 0);
    if (!run || view === this.homes.get(run.role)?.main || (view instanceof BranchView && view.run === run.id)) return;
    throw fsError('EACCES', `run ${run.id} reaches only its own branch and its Home's main, not ${view.name}`);
  }

  /** A run that reads its own Home's main: the read goes into its branch's manifest, like a read in the branch. */
  readerOf(view: View, caller: Caller | null): BranchView['reads'] | undefined {
    const run = caller ? this.runs.runOf(caller.pid) : undefined;
    if (!run || run.role !== view.name) return undefined;
    return this.homes.get(run.role)?.branches.get(run.branch)?.reads;
  }

  // ---- control API -------------------------------------------------------------------------------

  private need(role: string): Mounted {
    validateRole(role);
    const m = this.homes.get(role);
    if (m) return m;
    if (this.archived.has(role)) throw new UserError(`Home ${role} is archived; bring it back with: nas home unarchive ${role}`, 409);
    throw new UserError(`no Home named "${role}"; create it with: nas home create ${role}`, 404);
  }

  private needBranch(role: string, branch: string): BranchView {
    validateBranch(branch);
    const view = this.need(role).branches.get(branch);
    if (!view) throw new UserError(`Home ${role} has no branch "${branch}"; create it with: nas branch create ${role}/${branch}`, 404);
    return view;
  }

  /**
   * One view's committed state for the control API's readers: main's current head, or a branch's head after
   * committing everything pending. `config` is always main's: a branch is judged by its target's rules.
   */
  async snapshot(role: string, branch?: string): Promise<Snapshot> {
    const m = this.need(role);
    const mainHead = await m.home.mainHead();
    const config = await m.home.config(mainHead);
    const at = (name: string) => `${this.opts.mount}/${name}`;
    if (!branch || branch === 'main') return { home: m.home, config, name: role, path: at(role), commit: mainHead, mainHead };
    const view = this.needBranch(role, branch);
    await view.sync();
    return { home: m.home, config, name: view.name, path: at(view.name), commit: view.head, mainHead, view };
  }

  /** Where the views are mounted. */
  get mountRoot(): string {
    return this.opts.mount;
  }

  homeOf(role: string): Home {
    return this.need(role).home;
  }

  branchView(role: string, branch: string): BranchView {
    return this.needBranch(role, branch);
  }

  /** Whom a view shows as the owner of what has no metadata record: a branch's (its write lease's principal), else nasd's. */
  viewOwner(role: string, branch?: string): Owner {
    const view = branch && branch !== 'main' ? this.need(role).branches.get(branch) : undefined;
    return view?.owner ?? this.opts.owner;
  }

  branchNames(role: string): string[] {
    return [...this.need(role).branches.keys()];
  }

  branchViews(role: string): BranchView[] {
    return [...this.need(role).branches.values()];
  }

  roles(): string[] {
    return [...this.homes.keys()];
  }

  async createHome(role: string, template: string | undefined, owner: string): Promise<HomeSummary> {
    validateRole(role);
    if (this.archived.has(role)) throw new UserError(`an archived Home is named "${role}"; choose another name, or nas home unarchive ${role}`, 409);
    const home = await Home.create(this.opts.stateDir, role, { template, templatesDir: this.opts.templatesDir, owner, identity: this.opts.identity });
    const m = await this.mount(home);
    return this.describeHome(m);
  }

  /**
   * The whole Home in one file (a git bundle), after committing what every branch has pending; an archived Home
   * exports from its archived Store, as it was left.
   */
  async exportHome(role: string, file: string): Promise<Exported> {
    const started = process.hrtime.bigint();
    let store: Store;
    if (this.archived.has(role)) store = await Store.open(archiveDirFor(this.opts.stateDir, role));
    else {
      store = this.need(role).home.store;
      await this.sync(role);
    }
    const { bytes, refs } = await exportHome(store, file);
    return { role, file, bytes, refs, ms: Math.round(Number(process.hrtime.bigint() - started) / 1e6) };
  }

  /** A Home from an exported file, under its own role or `as`; mounted at once, its branches with it. */
  async importHome(file: string, as?: string): Promise<Imported> {
    const started = process.hrtime.bigint();
    const { stateDir, identity } = this.opts;
    const home = await importHome(stateDir, file, as, identity, (role) => this.archived.has(role), (store) => endLeases(store, identity));
    let m: Mounted;
    try {
      m = await this.mount(home);
    } catch (err) {
      this.homes.delete(home.role);
      await fs.rm(home.dir, { recursive: true, force: true });
      throw new UserError(`the imported Home ${home.role} could not be opened, so nothing was imported: ${(err as Error).message}`);
    }
    const refs = (await home.store.listRefs('refs/')).size;
    return { ...this.describeHome(m), file, refs, ms: Math.round(Number(process.hrtime.bigint() - started) / 1e6) };
  }

  listHomes(): HomeSummary[] {
    return [...[...this.homes.values()].map((m) => this.describeHome(m)), ...this.archived.values()].sort((a, b) => (a.role < b.role ? -1 : 1));
  }

  /** Take a Home out of the mount: what every branch has pending is committed, its views and binds go. */
  private async unmount(role: string): Promise<void> {
    const m = this.need(role);
    this.homes.delete(role);
    for (const view of m.branches.values()) {
      try {
        await this.opts.binds?.unbindUnder(`${this.opts.mount}/${view.name}`);
        await view.close();
      } catch (err) {
        // What could not be committed stays in the branch's upper directory, inside the Store: the next open recovers it.
        this.opts.log.error({ err, view: view.name }, 'could not commit pending changes while unmounting; they stay on disk for the next open');
      }
    }
  }

  /** Archive a Home: unmounted, its Store kept as it is under `<state>/archive/` until unarchived. */
  async archiveHome(role: string): Promise<HomeSummary> {
    await this.unmount(role);
    try {
      await moveToArchive(this.opts.stateDir, role);
    } catch (err) {
      await this.mount(await Home.open(this.opts.stateDir, role, this.opts.identity));
      throw err;
    }
    await this.noteArchived(role);
    this.opts.log.info({ role }, 'Home archived');
    return this.archived.get(role)!;
  }

  async unarchiveHome(role: string): Promise<HomeSummary> {
    validateRole(role);
    await moveFromArchive(this.opts.stateDir, role);
    this.archived.delete(role);
    const m = await this.mount(await Home.open(this.opts.stateDir, role, this.opts.identity));
    this.opts.log.info({ role }, 'Home unarchived');
    return this.describeHome(m);
  }

  /** Record a Home's new place in its life (retired; or the Home it succeeds). */
  async setLifecycle(role: string, change: Partial<LifecycleRecord>, message: string): Promise<void> {
    const m = this.need(role);
    m.life = await new Lifecycle(m.home.store, m.home.identity).update(change, message);
  }

  /**
   * Follow main when it moves outside a view (a merge, or an operator pushing to the Store): the main view
   * and the Home's metadata are re-read. Cheap: one ref read per Home.
   */
  refreshMains(): Promise<void> {
    // One pass at a time (the watcher and the tick may both ask): an older pass never lands after a newer one.
    const pass = this.refreshing.then(() => this.refreshMainsNow());
    this.refreshing = pass.catch(() => undefined);
    return pass;
  }

  private async refreshMainsNow(): Promise<void> {
    for (const m of this.homes.values()) {
      const head = await m.home.mainHead();
      if (head === m.main.head) continue;
      m.config = await m.home.config(head);
      m.pool.limit = m.config.limits.home_quota_bytes;
      for (const problem of m.config.problems) this.opts.log.warn({ role: m.home.role, problem }, 'Home metadata problem; defaults apply');
      m.main.setHead(new GitLayer(m.home.store, await m.home.store.readCommit(head)));
    }
  }

  private describeHome(m: Mounted): HomeSummary {
    return {
      role: m.home.role,
      store: m.home.dir,
      main: m.main.head,
      branches: [...m.branches.keys()],
      problems: m.config.problems,
      state: m.life.retired ? 'retired' : 'active',
      ...(m.life.retired ? { successor: m.life.retired.successor } : {}),
      ...(m.life.predecessor ? { predecessor: m.life.predecessor.role } : {}),
    };
  }

  async createBranch(role: string, branch: string, opts: { from?: string; at?: string; ttl?: string; run?: string }): Promise<BranchCreated> {
    const m = this.need(role);
    if (m.life.retired) throw new UserError(`Home ${role} is retired (its successor is ${m.life.retired.successor}): it takes no new branches`, 409);
    const max = m.config.limits.max_branches;
    if (m.branches.size >= max) {
      throw new UserError(`Home ${role} has ${m.branches.size} branches, the most its .nas/limits.yaml allows (max_branches: ${max}); ` +
        'discard one (nas branch discard) or raise the limit (nas home config)', 409);
    }
    const started = process.hrtime.bigint();
    const record = await m.home.createBranch(branch, { ...opts, defaultTtl: m.config.limits.branch_ttl_default });
    await this.openBranch(m, record);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    return { ...record, home: role, view: `${role}@${branch}`, createdInMs: Math.round(ms * 100) / 100 };
  }

  async listBranches(role: string): Promise<BranchListing[]> {
    const m = this.need(role);
    const records = await m.home.branches();
    return Promise.all(records.map(async (r) => {
      const view = m.branches.get(r.name);
      return { ...r, head: view?.head, expired: view?.expired ?? false, pending: view?.pendingChanges ?? 0, quota: view?.quota, bytes: await view?.bytesByClass() };
    }));
  }

  /**
   * The owner gives a branch more time: it now expires `ttl` from now. An expired branch (in its grace period)
   * takes writes again and gets its scratch binds back; leases that ended with it stay ended, and its PR stays
   * expired (propose it again).
   */
  async extendBranch(role: string, branch: string, ttl: string): Promise<BranchExtended> {
    const m = this.need(role);
    const view = this.needBranch(role, branch);
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
      for (const b of this.scratchBinds(view)) await this.opts.binds?.bind(b.source, b.target);
      this.opts.log.info({ view: view.name, expires: extended.expires }, 'expired branch extended: writable again');
    }
    return { ...extended, view: view.name, reopened };
  }

  /** Commit everything pending in one branch (or all of a Home's) and report the heads. */
  async sync(role: string, branch?: string): Promise<SyncResult> {
    const m = this.need(role);
    const views = branch ? [this.needBranch(role, branch)] : [...m.branches.values()];
    for (const v of views) await v.sync();
    return Object.fromEntries(views.map((v) => [v.name, v.head]));
  }

  /**
   * Discard a branch (a parallel attempt that lost): its work since it forked from main goes to the recycle
   * area, then its view, ref, record and directory go. Scratch (workspace/) goes with it, as documented.
   */
  async discardBranch(role: string, branch: string): Promise<Omit<Discarded, 'revokedLeases'>> {
    const m = this.need(role);
    const view = this.needBranch(role, branch);
    // Out of the mount first, then commit what is pending: nothing can land after the work is counted.
    await this.opts.binds?.unbindUnder(`${this.opts.mount}/${view.name}`);
    m.branches.delete(branch);
    m.records.delete(branch);
    try {
      await view.close();
    } catch (err) {
      m.branches.set(branch, view);
      throw err;
    }
    const store = m.home.store;
    const head = view.head;
    const fork = await store.mergeBase(head, await m.home.mainHead());
    const tree = async (c: string | null) => (c ? (await store.readCommit(c)).tree : null);
    const work = (await store.fileChanges(await tree(fork), await tree(head))).filter((c) => c.after);
    await m.home.trash.add(await itemsFromGit(store, work.map((c) => ({ path: c.path, entry: c.after! })), branch, view.run));
    await m.home.removeBranch(branch);
    return { discarded: view.name, head, recycled: work.map((c) => c.path) };
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
    const { now, jumped } = await this.clock.read();
    if (jumped > 0) await this.restartGrace(now, jumped);
    // The record is read again at each step: an owner's extend may land while this pass awaits.
    const due = (m: Mounted, branch: string) => {
      const record = m.records.get(branch);
      return record && Date.parse(record.expires) <= now ? record : undefined;
    };
    for (const [role, m] of this.homes) {
      for (const branch of [...m.records.keys()]) {
        const view = m.branches.get(branch);
        let record = due(m, branch);
        if (!view || !record) continue;
        if (!view.expired) {
          await this.opts.binds?.unbindUnder(`${this.opts.mount}/${view.name}`);
          await view.expire(`${view.name} expired at ${record.expires} (ttl ${record.ttl}); it is read-only until it is removed`);
          this.opts.log.warn({ view: view.name, expires: record.expires, ttl: record.ttl }, 'branch expired: read-only now');
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
        await this.discardBranch(role, branch);
        this.opts.log.warn({ view: view.name, grace: m.config.limits.branch_grace, since: record.grace_from }, 'expired branch removed after its grace period; its work is in the recycle area');
        await hooks.discarded(role, branch);
      }
    }
  }

  /** The wall clock jumped forward: every expired branch gets a full grace period from now before it is removed. */
  private async restartGrace(now: number, jumped: number): Promise<void> {
    const postponed: string[] = [];
    for (const m of this.homes.values()) {
      for (const [branch, view] of m.branches) {
        const record = m.records.get(branch);
        if (!view.expired || !record) continue;
        await this.setGraceFrom(m, record, now);
        postponed.push(view.name);
      }
    }
    this.opts.log.warn({ jumpedMs: jumped, postponed }, 'the wall clock jumped forward: expired branches keep a full grace period from now');
  }

  private async setGraceFrom(m: Mounted, record: BranchRecord, now: number): Promise<void> {
    // The record as it is now (an extend may have replaced it), noted before the write: an extend drops it.
    const current = m.records.get(record.name);
    if (!current) return;
    const updated = { ...current, grace_from: new Date(now).toISOString() };
    m.records.set(record.name, updated);
    await m.home.writeBranchRecord(updated);
  }

  /**
   * Empty the recycle area of what was deleted before the cutoff (default: the Home's trash_keep_days ago).
   */
  async trashPurge(role: string, olderThan?: string): Promise<TrashPurged> {
    const m = this.need(role);
    const seconds = olderThan !== undefined ? parseDuration(olderThan) : m.config.maintenance.trash_keep_days * 86400;
    const cutoff = new Date(Date.now() - seconds * 1000);
    const purged = await m.home.trash.purge(cutoff);
    if (purged.length > 0) this.opts.log.info({ role, purged: purged.length, cutoff: cutoff.toISOString() }, 'recycle area purged');
    return { cutoff: cutoff.toISOString(), purged };
  }

  async trashList(role: string): Promise<TrashRecord[]> {
    return this.need(role).home.trash.list();
  }

  /** The branch a restore would write into (for the caller's authorization): --branch, else where the file was deleted. */
  async trashTarget(role: string, opts: { path?: string; id?: string; branch?: string }): Promise<string> {
    if (opts.branch) return opts.branch;
    const record = await this.findTrash(role, opts);
    return record.branch;
  }

  private async findTrash(role: string, opts: { path?: string; id?: string; branch?: string }): Promise<TrashRecord> {
    const m = this.need(role);
    const path = opts.path ? validateRelPath(opts.path) : undefined;
    if (!path && !opts.id) throw new UserError('name the path to restore (or --id from nas trash list)');
    const records = await m.home.trash.list();
    const record = records.find((r) => (opts.id ? r.id === opts.id : r.path === path && (!opts.branch || r.branch === opts.branch)));
    if (!record) {
      const what = opts.id ? `id ${opts.id}` : `${path}${opts.branch ? ` deleted from ${opts.branch}` : ''}`;
      throw new UserError(`nothing in the recycle area of ${role} matches ${what}; see nas trash list ${role}`, 404);
    }
    return record;
  }

  /**
   * Restore a deleted path into a branch: the newest record for the path (from the given branch when named),
   * or the record with the given id. Refuses to overwrite anything that exists unless told where to put it.
   */
  async trashRestore(role: string, opts: { path?: string; id?: string; branch?: string; to?: string }): Promise<TrashRestored> {
    const m = this.need(role);
    const record = await this.findTrash(role, opts);
    const branch = opts.branch ?? record.branch;
    if (branch === 'main') throw new UserError('main is protected: restore into a branch (--branch <name>) and merge it');
    const view = this.needBranch(role, branch);
    const target = opts.to ? validateRelPath(opts.to) : record.path;
    if (await view.exists(target)) {
      throw new UserError(`${target} exists in ${role}@${branch}; nothing was changed. Pass --to <path> to restore it elsewhere`, 409);
    }
    await view.restore(target, record.kind, await m.home.trash.content(record));
    return { restored: record, to: target, view: view.name, head: view.head };
  }

  /**
   * Space as `df` should see it: on a branch view, the branch's quota (total, used, free), so df tells the
   * truth before EDQUOT does, never more than the disk that holds the state directory has; elsewhere that disk.
   */
  async statfs(view?: View): Promise<FsStats> {
    const s = await fs.statfs(this.opts.stateDir);
    const disk = {
      bsize: s.bsize, frsize: s.bsize, blocks: s.blocks, bfree: s.bfree, bavail: s.bavail,
      files: s.files, ffree: s.ffree, favail: s.ffree, fsid: 0, flag: 0, namemax: 255,
    };
    if (!(view instanceof BranchView)) return disk;
    const { used, limit } = view.quota;
    const blocks = Math.min(disk.blocks, Math.ceil(limit / s.bsize));
    const free = Math.max(0, Math.min(disk.bavail, Math.floor((limit - used) / s.bsize), blocks));
    return { ...disk, blocks, bfree: free, bavail: free };
  }

  status(): StatusReport {
    return { mount: this.opts.mount, state_dir: this.opts.stateDir, pid: process.pid, homes: this.listHomes() };
  }

  /** Commit everything pending in every branch (shutdown). */
  async close(): Promise<void> {
    for (const m of this.homes.values()) {
      for (const v of m.branches.values()) {
        try {
          await v.close();
        } catch (err) {
          this.opts.log.error({ err, view: v.name }, 'could not commit pending changes at shutdown; they stay on disk for the next start');
        }
      }
    }
  }

  /**
   * The state directory holds every Home's objects and every branch's upper directory: only nasd (root) may
   * read it, else any local user could read around the views (their modes, the inbox mask, the read
   * manifest). Made 0700, and repaired (with a log line) when found open, at every start.
   */
  async ensureStateDir(): Promise<void> {
    const { stateDir, log } = this.opts;
    await fs.mkdir(`${stateDir}/homes`, { recursive: true, mode: 0o700 });
    const names = await fs.readdir(`${stateDir}/homes`);
    const homes = names.filter((n) => n.endsWith('.git')).map((n) => `${stateDir}/homes/${n}`);
    for (const partial of names.filter((n) => n.startsWith(IMPORTING))) {
      await fs.rm(`${stateDir}/homes/${partial}`, { recursive: true, force: true });
      log.warn({ dir: partial }, 'removed what an interrupted import left');
    }
    for (const dir of [stateDir, `${stateDir}/homes`, ...homes]) {
      const st = await fs.lstat(dir);
      if (!st.isDirectory() || (st.mode & 0o077) === 0) continue;
      await fs.chmod(dir, 0o700);
      log.warn({ dir, was: (st.mode & 0o777).toString(8) }, 'the state directory was readable by other users: made 0700');
    }
  }
}

/**
 * Every lease still in force is recorded as revoked before the Home is mounted: a token issued for the Home that
 * was exported (which may live on, here or elsewhere) must not also work in a copy of it.
 */
async function endLeases(store: Store, identity: Identity): Promise<void> {
  const leases = new LeaseStore(store, identity);
  for (const lease of await leases.list()) {
    if (!lease.revoked && Date.parse(lease.expires) > Date.now()) await leases.revoke(lease.id);
  }
}
