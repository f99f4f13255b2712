import fs from 'node:fs/promises';
import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import { validateBranch, validateRole } from '../util/names.js';
import type { Identity } from '../store/store.js';
import { Home, type BranchRecord } from '../home/home.js';
import { Checkpoints } from '../home/checkpoints.js';
import { IMPORTING } from '../home/portable.js';
import { Lifecycle, listArchived, archiveDirFor, type LifecycleRecord } from '../home/lifecycle.js';
import { Store } from '../store/store.js';
import { MAIN_REF } from '../store/refs.js';
import { scratchRoots, type HomeConfig } from '../config/home-config.js';
import { branchRef } from '../store/refs.js';
import { compileRules } from '../policy/policy.js';
import { GitLayer } from '../cow/git-layer.js';
import { MainView } from '../cow/main-view.js';
import { BranchView } from '../cow/branch/branch-view.js';
import type { Owner } from '../cow/attr.js';
import { Space } from '../cow/branch/space.js';
import { RunTracker } from './run-tracker.js';
import { WallClock } from '../util/clock.js';
import { OwnerShare } from '../cow/owner-share.js';

/** Bind mounts of branches' scratch roots over their views (made by the daemon once the mount is up). */
export interface ScratchBinds {
  bind(source: string, target: string): Promise<void>;
  unbindUnder(prefix: string): Promise<void>;
}

export interface HomeSetOptions {
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
  /**
   * Whether the kernel checks the ACLs views report (default true: nasd asks for them at INIT). False on a kernel
   * connection an older nasd set up without them (taken over by a reload): then nothing is shared (owner-share.ts).
   */
  acls?: boolean;
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

/** An open Home: its views, branch records, checkpoints and commit views, quota pool and place in its life. */
export interface Mounted {
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
  /** In a cluster, branches other hosts hold (`<role>@<branch>`), read-only at their last pushed heads. */
  elsewhere: Map<string, MainView>;
  /** The Home's quota across all branches: every branch's Space adds to it. */
  pool: Space;
  /** Retired (and its successor), or the Home it succeeds. */
  life: LifecycleRecord;
}

/** An archived Home: its Store kept under `<state>/archive/`, not mounted. */
export interface ArchivedHome {
  role: string;
  store: string;
  main: string;
}

/**
 * The open Homes and their views: loaded at start, each Home's main, branches, checkpoints and commit views;
 * opening and closing branches (with their scratch binds), following main, closing at shutdown. The mount
 * table (what fuse-ops asks) and the workflows (what the control API asks) work on it.
 */
export class HomeSet {
  private readonly homes = new Map<string, Mounted>();
  /** Archived Homes: kept, not mounted. */
  readonly archived = new Map<string, ArchivedHome>();
  /** The runs in flight, by PID namespace: whose process a request comes from. */
  readonly runs = new RunTracker();
  private refreshing: Promise<unknown> = Promise.resolve();
  readonly clock: WallClock;

  /** What the mount keeps of the views (kernel and binding caches): nasd sets it once mounted. */
  kernelCache: {
    forget(roles: string[] | null): Promise<void>;
    /** The views whose nodes may have an access ACL (the binding answers every other node's itself). */
    share?(names: string[]): void;
    stats?(): { hits: number; misses: number; nodes: number; written: number };
  } = {
    forget: async () => undefined,
  };

  /**
   * nasd changed a Home's views on its own (a merge, a restore, an expiry...; every Home's when null): what the
   * kernel holds of them goes, and this resolves once it is told, so whoever asked then reads the change.
   */
  viewsChanged(role: string | null): Promise<void> {
    this.kernelCache.share?.(this.sharedViews());
    return this.kernelCache.forget(role === null ? null : [role]);
  }

  /** The branch views whose owner's rights a write-lease principal shares: where nodes have ACLs. */
  sharedViews(): string[] {
    return [...this.homes.values()].flatMap((m) => [...m.branches.values()].filter((v) => v.share.sharers.length > 0).map((v) => v.name));
  }

  constructor(readonly opts: HomeSetOptions) {
    this.clock = opts.clock ?? new WallClock();
  }

  /** Open every Home in the state directory and every branch, recovering what a crash left. */
  async load(): Promise<void> {
    for (const role of await Home.list(this.opts.stateDir)) {
      try {
        await this.open(await Home.open(this.opts.stateDir, role, this.opts.identity));
      } catch (err) {
        this.opts.log.error({ err, role }, 'cannot open Home; it is not mounted');
      }
    }
    for (const role of await listArchived(this.opts.stateDir)) await this.noteArchived(role);
  }

  async noteArchived(role: string): Promise<void> {
    const store = archiveDirFor(this.opts.stateDir, role);
    const main = (await (await Store.open(store)).readRef(MAIN_REF).catch(() => null)) ?? '';
    this.archived.set(role, { role, store, main });
  }

  /** Mount a Home's views: main, every branch, every checkpoint. */
  async open(home: Home): Promise<Mounted> {
    const head = await home.mainHead();
    const config = await home.config(head);
    for (const problem of config.problems) this.opts.log.warn({ role: home.role, problem }, 'Home metadata problem; defaults apply');
    const main = new MainView(home.role, new GitLayer(home.store, await home.store.readCommit(head)), this.opts.owner, scratchRoots(config.maintenance));
    void home.store.lastChange.prepare(head);
    const mounted: Mounted = {
      home, config, main, branches: new Map(), records: new Map(), checkpoints: new Map(), commits: new Map(), elsewhere: new Map(),
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
    const m = this.mounted(role);
    if (!commit) return void m.checkpoints.delete(name);
    const layer = new GitLayer(m.home.store, await m.home.store.readCommit(commit));
    const view = new MainView(`${role}:${name}`, layer, this.opts.owner, []);
    m.checkpoints.set(name, view);
  }

  /** The branches other hosts hold, as the git server has them (src/cluster): shown read-only, the host named. */
  async showElsewhere(role: string, branches: { branch: string; host: string; commit: string }[]): Promise<void> {
    const m = this.mounted(role);
    const wanted = new Map(branches.filter((b) => !m.branches.has(b.branch)).map((b) => [b.branch, b]));
    let changed = false;
    for (const branch of m.elsewhere.keys()) if (!wanted.has(branch)) changed = m.elsewhere.delete(branch);
    for (const [branch, b] of wanted) {
      const shown = m.elsewhere.get(branch);
      if (shown?.head === b.commit && shown.elsewhere === b.host) continue;
      const layer = new GitLayer(m.home.store, await m.home.store.readCommit(b.commit));
      if (shown?.elsewhere === b.host) shown.setHead(layer);
      else m.elsewhere.set(branch, new MainView(`${role}@${branch}`, layer, this.opts.owner, [], b.host));
      changed = true;
    }
    if (changed) await this.viewsChanged(role);
  }

  async openBranch(m: Mounted, record: BranchRecord): Promise<BranchView> {
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
        acls: this.opts.acls ?? true,
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
    await this.bindScratch(view);
    return view;
  }

  /** Put a branch view's scratch roots (workspace/) over it, straight from disk. */
  async bindScratch(view: BranchView): Promise<void> {
    for (const b of this.scratchBinds(view)) await this.opts.binds?.bind(b.source, b.target);
  }

  /** Take a branch view's scratch binds away (expiry, discard, unmount). */
  async unbindScratch(view: BranchView): Promise<void> {
    await this.opts.binds?.unbindUnder(`${this.opts.mount}/${view.name}`);
  }

  /** Where each scratch root of a branch view lives on disk, and where it shows under the mount. */
  private scratchBinds(view: BranchView): { source: string; target: string }[] {
    return view.scratchDirs().map(({ name, dir }) => ({ source: dir, target: `${this.opts.mount}/${view.name}/${name}` }));
  }

  /** Every scratch bind of every open branch view (made once the FUSE mount is up). */
  allScratchBinds(): { source: string; target: string }[] {
    return [...this.homes.values()].flatMap((m) => [...m.branches.values()].flatMap((v) => this.scratchBinds(v)));
  }

  // ---- control API -------------------------------------------------------------------------------

  /** Every open Home. */
  all(): IterableIterator<Mounted> {
    return this.homes.values();
  }

  /** The open Home of this role, or undefined. */
  find(role: string): Mounted | undefined {
    return this.homes.get(role);
  }

  /** The open Home of this role, or a UserError that says why not. */
  mounted(role: string): Mounted {
    validateRole(role);
    const m = this.homes.get(role);
    if (m) return m;
    if (this.archived.has(role)) throw new UserError(`Home ${role} is archived; bring it back with: nas home unarchive ${role}`, 409);
    throw new UserError(`no Home named "${role}"; create it with: nas home create ${role}`, 404);
  }

  /** A branch view, or a UserError that says how to make it. */
  branch(role: string, branch: string): BranchView {
    validateBranch(branch);
    const view = this.mounted(role).branches.get(branch);
    if (!view) throw new UserError(`Home ${role} has no branch "${branch}"; create it with: nas branch create ${role}/${branch}`, 404);
    return view;
  }

  /**
   * One view's committed state for the control API's readers: main's current head, or a branch's head after
   * committing everything pending. `config` is always main's: a branch is judged by its target's rules.
   */
  async snapshot(role: string, branch?: string): Promise<Snapshot> {
    const m = this.mounted(role);
    const mainHead = await m.home.mainHead();
    const config = await m.home.config(mainHead);
    const at = (name: string) => `${this.opts.mount}/${name}`;
    if (!branch || branch === 'main') return { home: m.home, config, name: role, path: at(role), commit: mainHead, mainHead };
    const view = this.branch(role, branch);
    await view.sync();
    return { home: m.home, config, name: view.name, path: at(view.name), commit: view.head, mainHead, view };
  }

  /** Where the views are mounted. */
  get mountRoot(): string {
    return this.opts.mount;
  }

  homeOf(role: string): Home {
    return this.mounted(role).home;
  }

  branchView(role: string, branch: string): BranchView {
    return this.branch(role, branch);
  }

  /**
   * Who owns what has no metadata record in a view (nasd's owner, in every view), and who shares its rights there
   * (a branch's write-lease principals): owner-share.ts.
   */
  viewShare(role: string, branch?: string): OwnerShare {
    const view = branch && branch !== 'main' ? this.mounted(role).branches.get(branch) : undefined;
    return view?.share ?? new OwnerShare(this.opts.owner);
  }

  branchNames(role: string): string[] {
    return [...this.mounted(role).branches.keys()];
  }

  branchViews(role: string): BranchView[] {
    return [...this.mounted(role).branches.values()];
  }

  roles(): string[] {
    return [...this.homes.keys()];
  }

  /** Drop a Home that could not open (an import): nothing of it is served. */
  forget(role: string): void {
    this.homes.delete(role);
  }

  /** Take a Home out of the mount: what every branch has pending is committed, its views and binds go. */
  async unmount(role: string): Promise<void> {
    const m = this.mounted(role);
    this.homes.delete(role);
    for (const view of m.branches.values()) {
      try {
        await this.unbindScratch(view);
        await view.close();
      } catch (err) {
        // What could not be committed stays in the branch's upper directory, inside the Store: the next open recovers it.
        this.opts.log.error({ err, view: view.name }, 'could not commit pending changes while unmounting; they stay on disk for the next open');
      }
    }
  }

  /** Record a Home's new place in its life (retired; or the Home it succeeds). */
  async setLifecycle(role: string, change: Partial<LifecycleRecord>, message: string): Promise<void> {
    const m = this.mounted(role);
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
      void m.home.store.lastChange.prepare(head);
      await this.viewsChanged(m.home.role);
    }
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
