import fs from 'node:fs/promises';
import { fsError } from '../util/errors.js';
import type { Caller } from '../util/owner.js';
import { GitLayer } from '../cow/git-layer.js';
import { MainView } from '../cow/main-view.js';
import { BranchView } from '../cow/branch/branch-view.js';
import type { FsStats, View } from '../cow/view.js';
import type { HomeSet } from './home-set.js';

/** A commit id (or an unambiguous prefix of one) under the mount root: `<role>:<7 to 40 hex digits>`. */
const COMMIT_ID = /^[0-9a-f]{7,40}$/;
/** Commit views kept per Home; the least recently used goes first (it is looked up again when named). */
const COMMIT_VIEWS = 32;

/**
 * What fuse-ops asks: the names under the mount root (`<role>` for main, `<role>@<branch>`, `<role>:<checkpoint>`,
 * `<role>:<commit>`) and the view each stands for, who may reach a view (runs), where a run's reads of main are
 * recorded, and the space df shows.
 */
export class MountTable {
  constructor(private readonly homes: HomeSet) {}

  /** Names under the mount root. */
  rootNames(): string[] {
    const names: string[] = [];
    for (const m of this.homes.all()) {
      const role = m.home.role;
      names.push(role);
      for (const branch of m.branches.keys()) names.push(`${role}@${branch}`);
      for (const branch of m.elsewhere.keys()) names.push(`${role}@${branch}`);
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
      const m = this.homes.find(name.slice(0, colon));
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
    const m = this.homes.find(at < 0 ? name : name.slice(0, at));
    if (!m) return undefined;
    const branch = name.slice(at + 1);
    return at < 0 || branch === 'main' ? m.main : (m.branches.get(branch) ?? m.elsewhere.get(branch));
  }

  /**
   * Make `<role>:<commit>` a view when it names a commit of the Home (a lookup of a name not listed): history
   * is browsable by commit id, read-only, as checkpoints are. Checkpoint names never look like commit ids.
   */
  async resolve(name: string): Promise<void> {
    const colon = name.indexOf(':');
    if (colon < 0) return;
    const m = this.homes.find(name.slice(0, colon));
    const spec = name.slice(colon + 1);
    if (!m || m.checkpoints.has(spec) || m.commits.has(spec) || !COMMIT_ID.test(spec)) return;
    const commit = await m.home.store.findCommit(spec);
    if (!commit || m.commits.has(spec)) return;
    const view = new MainView(name, new GitLayer(m.home.store, await m.home.store.readCommit(commit)), this.homes.opts.owner, []);
    m.commits.set(spec, view);
    for (const old of m.commits.keys()) {
      if (m.commits.size <= COMMIT_VIEWS) break;
      m.commits.delete(old);
    }
  }

  /** Whether a path is in a read-only view (main, a checkpoint, a commit): the kernel may keep its pages between opens. */
  readOnly(path: string): boolean {
    const slash = path.indexOf('/', 1);
    return this.view(slash < 0 ? path.slice(1) : path.slice(1, slash))?.kind === 'main';
  }

  /**
   * The top-level names a run's processes reach (admit): its Home's main, under both names, its own branch, and the
   * mains of the Homes its Home reads shared memory from (`shared:` in .nas/role.yaml).
   */
  namesOfRun(run: { role: string; branch: string }): string[] {
    return [run.role, `${run.role}@main`, `${run.role}@${run.branch}`, ...this.sharedOf(run.role).flatMap((s) => [s, `${s}@main`])];
  }

  /** The Homes whose memory a Home reads (shared scopes), those served here. */
  private sharedOf(role: string): string[] {
    return (this.homes.find(role)?.config.role.shared ?? []).filter((s) => s !== role && this.homes.find(s));
  }

  /**
   * A run's processes reach two views: their own branch and their Home's main, where every read goes into the
   * run's manifest (readerOf). Any other view is EACCES: another branch (another run's, or one the run's user
   * holds a lease on), another Home, history views (any commit could be another run's work); reads there would
   * escape the manifest, and a PR that read the inbox that way would still merge by policy.
   */
  admit(view: View, caller: Caller): void {
    const run = this.homes.runs.runOf(caller.pid);
    if (!run || view === this.homes.find(run.role)?.main || (view instanceof BranchView && view.run === run.id)) return;
    if (this.sharedOf(run.role).some((s) => view === this.homes.find(s)?.main)) return;
    throw fsError('EACCES', `run ${run.id} reaches only its own branch, its Home's main and the mains of the Homes it shares memory from, not ${view.name}`);
  }

  /**
   * A run that reads its own Home's main: the read goes into its branch's manifest, like a read in the branch; one
   * that reads a shared Home's main, as `<home>:<path>` (so a read of that Home's inbox counts as untrusted input too).
   */
  readerOf(view: View, caller: Caller): { record(path: string, oid: string): Promise<void> } | undefined {
    const run = this.homes.runs.runOf(caller.pid);
    const reads = run && this.homes.find(run.role)?.branches.get(run.branch)?.reads;
    if (!run || !reads) return undefined;
    if (run.role === view.name) return reads;
    if (!this.sharedOf(run.role).includes(view.name)) return undefined;
    return { record: (path: string, oid: string) => reads.record(`${view.name}:${path}`, oid) };
  }

  /**
   * Space as `df` should see it: on a branch view, the branch's quota (total, used, free), so df tells the
   * truth before EDQUOT does, never more than the disk that holds the state directory has; elsewhere that disk.
   */
  async statfs(view?: View): Promise<FsStats> {
    const s = await fs.statfs(this.homes.opts.stateDir);
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
}
