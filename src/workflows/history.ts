import { UserError } from '../util/errors.js';
import { nasTrailers } from '../util/text.js';
import { validateBranch, validateRelPath } from '../util/names.js';
import { Checkpoints, type Checkpoint } from '../home/checkpoints.js';
import { itemsFromGit, kindOfMode } from '../trash/trash.js';
import type { DiffReport, LogEntry, Restored } from '../api/types.js';
import { requireOwner, type Credentials } from '../api/credentials.js';
import { mapLimit } from '../util/concurrency.js';
import type { LeaseService } from './leases.js';
import type { PrService } from './prs.js';
import type { PullRequest } from '../merge/pr-store.js';
import { parseCheckDefinitions } from '../merge/checks.js';
import { readHomeConfig } from '../config/home-config.js';
import { MODE, type Entry } from '../store/store.js';
import { metaPath } from '../store/file-meta.js';
import type { HomeSet } from '../homes/home-set.js';
import type { Branches } from './branches.js';
import type { Readers } from './readers.js';
import { shownDiff } from '../merge/shown-diff.js';
import { checkRestore, isAppendOnly } from '../policy/policy.js';
import { revertCommit } from '../merge/revert.js';

/** The `.nas/` files a Home reads. */
const CONFIG_FILES = ['.nas/role.yaml', '.nas/limits.yaml', '.nas/maintenance.yaml', '.nas/policy.yaml', '.nas/merge.yaml', '.nas/checks.yaml'];

/** Checkpoints, restore, log, diff and .nas/ changes through the control API: who may, then the Home and its views. */
export class HistoryService {
  /** PRs being reverted now (`role#id`): a second revert meanwhile (two clicks) is refused, not made twice. */
  private readonly reverting = new Set<string>();

  constructor(
    private readonly homes: HomeSet,
    private readonly branches: Branches,
    private readonly leases: LeaseService,
    private readonly prs: PrService,
    private readonly readers: Readers,
    private readonly stateDir: string,
  ) {}

  private checkpoints(role: string): Checkpoints {
    const home = this.homes.homeOf(role);
    return new Checkpoints(home.store, home.identity);
  }

  /** Of main: the owner's. Of a branch: the owner's or a write lease's on it (what is pending is committed first). */
  async create(role: string, b: { name: string; branch?: string; message?: string }, creds: Credentials): Promise<Checkpoint> {
    const branch = b.branch && b.branch !== 'main' ? validateBranch(b.branch) : 'main';
    let by: string;
    if (branch === 'main') {
      requireOwner(creds, 'a checkpoint of main', this.stateDir);
      by = (await this.homes.snapshot(role)).config.role.owner ?? 'owner';
    } else by = (await this.leases.authorize(role, branch, 'write', creds, `a checkpoint of ${role}/${branch}`)).principal;
    const snap = await this.homes.snapshot(role, branch);
    const checkpoint = await this.checkpoints(role).create({ name: b.name, commit: snap.commit, branch, by, ...(b.message ? { message: b.message } : {}) });
    await this.homes.showCheckpoint(role, checkpoint.name, checkpoint.commit);
    return checkpoint;
  }

  list(role: string): Promise<Checkpoint[]> {
    return this.checkpoints(role).list();
  }

  async delete(role: string, name: string): Promise<Checkpoint> {
    const checkpoint = await this.checkpoints(role).delete(name);
    await this.homes.showCheckpoint(role, name, null);
    return checkpoint;
  }

  /** A checkpoint's name or a commit id, as a commit of this Home. */
  private async commitOf(role: string, spec: string): Promise<string> {
    const checkpoint = /^[0-9a-f]{4,40}$/i.test(spec) ? undefined : await this.checkpoints(role).get(spec);
    const commit = checkpoint?.commit ?? (await this.homes.homeOf(role).store.findCommit(spec));
    if (!commit) throw new UserError(`no checkpoint or commit "${spec}" in Home ${role}; see nas checkpoint list ${role} or nas log ${role}`, 404);
    return commit;
  }

  /**
   * The history of a branch (or main), newest first along first parents: each commit with its author, time,
   * subject and Nas-* trailers (run, lease, principal, intent...); with a path, only commits that changed it,
   * and only to a caller who could read each version of it through the mount.
   */
  async log(role: string, b: { branch?: string; path?: string; limit?: number }, creds: Credentials): Promise<LogEntry[]> {
    const path = b.path ? validateRelPath(b.path) : undefined;
    const limit = b.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UserError('--limit must be a whole number from 1 to 10000');
    const snap = await this.homes.snapshot(role, b.branch);
    const store = snap.home.store;
    const mayRead = path ? this.readers.mayRead(await this.readers.of(role, creds), store, this.homes.viewShare(role, b.branch)) : undefined;
    const out: LogEntry[] = [];
    for (let c: string | undefined = snap.commit, seen = 0; c && out.length < limit && seen < 100_000; seen++) {
      const commit = await store.readCommit(c);
      const parent = commit.parents[0];
      if (!path || (await this.touches(role, commit.tree, parent, path))) {
        // The version this commit made, or for a removal the one it removed.
        const version = async (p: string) => ((await store.lookupPath(commit.tree, p)) || !parent ? commit.tree : (await store.readCommit(parent)).tree);
        if (path && mayRead && !(await mayRead(await version(path), path))) {
          throw new UserError(`you could not read ${path} through the mount of ${snap.name} (as of commit ${c.slice(0, 12)}), so its history is not shown`, 403);
        }
        const subject = commit.message.split('\n', 1)[0];
        out.push({ commit: c, parents: commit.parents, time: new Date(commit.time * 1000).toISOString(), subject, trailers: nasTrailers(commit.message) });
      }
      c = parent;
    }
    return out;
  }

  /** Whether a commit changed a path (a file or a directory, its metadata records included): two lookups a side. */
  private async touches(role: string, tree: string, parent: string | undefined, path: string): Promise<boolean> {
    const store = this.homes.homeOf(role).store;
    const before = parent ? (await store.readCommit(parent)).tree : null;
    for (const p of [path, metaPath(path)]) {
      const [a, b] = await Promise.all([before ? store.lookupPath(before, p) : null, store.lookupPath(tree, p)]);
      if (a?.oid !== b?.oid || a?.mode !== b?.mode) return true;
    }
    return false;
  }

  /** The patch between two states (checkpoints or commits; by default a branch's fork point and its head, or main's last change). */
  async diff(role: string, b: { branch?: string; from?: string; to?: string; path?: string }, creds: Credentials): Promise<DiffReport> {
    const path = b.path ? validateRelPath(b.path) : undefined;
    const snap = await this.homes.snapshot(role, b.branch);
    const store = snap.home.store;
    const to = b.to ? await this.commitOf(role, b.to) : snap.commit;
    const from = b.from ? await this.commitOf(role, b.from)
      : snap.view ? ((await store.mergeBase(to, snap.mainHead)) ?? to) : ((await store.readCommit(to)).parents[0] ?? to);
    const [a, z] = await Promise.all([from, to].map(async (c) => (await store.readCommit(c)).tree));
    // What the caller could not read through the mount is named, not shown; what it is shown, it has read.
    const who = await this.readers.of(role, creds);
    const shown = await shownDiff(store, a, z, {
      under: path, mayRead: this.readers.mayRead(who, store, this.homes.viewShare(role, b.branch)), owner: this.homes.viewShare(role).owner,
    });
    await this.readers.record(who, shown.shown);
    return {
      view: snap.name, from, to, changes: shown.files.map((c) => ({ path: c.path, status: c.status, ...(c.meta ? { meta: c.meta } : {}) })),
      folders: shown.folders, patch: shown.patch, withheld: shown.withheld,
    };
  }

  /**
   * The supported way to change a Home's `.nas/` files (branches refuse them, main only merges): the new content
   * is checked first (nothing is made when it does not read whole), committed on a new branch `nas-config-<time>`
   * off main, and proposed; the PR waits for the owner, as every metadata change does.
   */
  async proposeConfig(role: string, b: { file: string; content: string; intent?: string }, creds: Credentials): Promise<PullRequest> {
    const file = validateRelPath(b.file);
    if (!CONFIG_FILES.includes(file)) throw new UserError(`${file} is not a Home metadata file; one of: ${CONFIG_FILES.join(', ')}`);
    const snap = await this.homes.snapshot(role);
    const store = snap.home.store;
    const mainTree = (await store.readCommit(snap.commit)).tree;
    const problems = file === '.nas/checks.yaml'
      ? parseCheckDefinitions(b.content).problems
      : (await readHomeConfig(async (p) => {
        if (p === file) return b.content;
        const e = await store.lookupPath(mainTree, p);
        return e ? (await store.readBlob(e.oid)).toString() : null;
      })).problems.filter((p) => p.startsWith(`${file}:`));
    if (problems.length > 0) throw new UserError(`${file} would not read whole; nothing was proposed:\n  ${problems.join('\n  ')}`);
    const owner = snap.config.role.owner ?? 'owner';
    const tree = await store.editTree(mainTree, new Map([[file, { oid: await store.writeBlob(b.content), mode: MODE.file }]]));
    if (tree === mainTree) throw new UserError(`${file} on main already reads so; nothing was proposed`, 409);
    const commit = await store.writeCommit({ tree, parents: [snap.commit], message: `Change ${file}\n\nNas-Principal: ${owner}\n`, author: { name: owner, email: `${owner}@agent-nas` } });
    const branch = `nas-config-${new Date().toISOString().replace(/[-:.TZ]/g, '').slice(0, 14)}-${commit.slice(0, 6)}`;
    await this.branches.createBranch(role, branch, { at: commit, ttl: '7d' });
    return this.prs.propose(role, branch, { intent: b.intent ?? `change ${file}` }, creds);
  }

  /**
   * Undo a merged PR (nas pr revert, the PR page's Revert): its inverse on today's main (merge/revert.ts) is
   * committed on a new branch `revert-<id>` off main and proposed, so it passes the same checks, policy and Human
   * Gate as any change, and what it deletes goes to the recycle area when it merges; main is never written here.
   * A revert of the same PR still undecided is named rather than made twice; a refused proposal leaves no branch.
   */
  async revert(role: string, id: number, creds: Credentials): Promise<PullRequest> {
    const key = `${role}#${id}`;
    if (this.reverting.has(key)) throw new UserError(`a revert of PR ${id} is being proposed right now: decide that one when it shows in nas pr list`, 409);
    this.reverting.add(key);
    try {
      return await this.proposeRevert(role, id, creds);
    } finally {
      this.reverting.delete(key);
    }
  }

  private async proposeRevert(role: string, id: number, creds: Credentials): Promise<PullRequest> {
    const pr = await this.prs.get(role, id);
    const open = (await this.prs.list(role)).find((p) => p.reverts === id && ['waiting', 'conflict', 'failed', 'merging'].includes(p.state));
    if (open) throw new UserError(`PR ${open.id} (branch ${open.branch}) reverts PR ${id} already and is ${open.state}: decide that one`, 409);
    const snap = await this.homes.snapshot(role);
    const owner = snap.config.role.owner ?? 'owner';
    const commit = await revertCommit(snap.home.store, pr, snap.commit, { name: owner, email: `${owner}@agent-nas` });
    const m = this.homes.mounted(role);
    const free = (name: string) => !m.branches.has(name) && !m.elsewhere.has(name);
    const branch = [`revert-${id}`, ...Array.from({ length: 98 }, (_, i) => `revert-${id}-${i + 2}`)].find(free);
    if (!branch) throw new UserError(`every name revert-${id}, revert-${id}-2 ... is taken: discard old revert branches first`, 409);
    await this.branches.createBranch(role, branch, { at: commit });
    const intent = `Revert PR ${id}: ${pr.intent}`;
    try {
      return await this.prs.propose(role, branch, { intent: intent.length > 500 ? `${intent.slice(0, 499)}…` : intent, reverts: id }, creds);
    } catch (err) {
      await this.branches.discardBranch(role, branch, `the revert of PR ${id} was not proposed`).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Return a branch's files (or those under the given paths) to a checkpoint's or a commit's state, as one new
   * commit on the branch: nothing is rewritten, and what the restore replaces or removes goes to the recycle
   * area. Paths policy protects (.nas/) are left as they are and reported, and so are an append-only file the
   * restore would not merely make grow, and a file the caller could not read through the mount at that commit
   * (what it does restore, it has read).
   */
  async restore(role: string, b: { branch: string; from: string; paths?: string[] }, creds: Credentials): Promise<Restored> {
    if (b.branch === 'main') throw new UserError('main changes only by merge: restore into a branch (nas branch create <role>/<branch>), then propose it', 409);
    const branch = validateBranch(b.branch);
    await this.leases.authorize(role, branch, 'write', creds, `restoring into ${role}/${branch}`);
    const who = await this.readers.of(role, creds);
    const paths = (b.paths ?? []).map(validateRelPath);
    const store = this.homes.homeOf(role).store;
    const commit = await this.commitOf(role, b.from);
    const snap = await this.homes.snapshot(role, branch);
    const view = snap.view!;
    const [now, then] = await Promise.all([snap.commit, commit].map(async (c) => (await store.readCommit(c)).tree));
    const under = (p: string) => paths.length === 0 || paths.some((q) => p === q || p.startsWith(`${q}/`));
    const out: Restored = { view: view.name, from: commit, restored: [], removed: [], refused: [], head: '' };
    const regular = (mode?: number) => mode === MODE.file || mode === MODE.exec;
    const mayRead = this.readers.mayRead(who, store, view.share);
    const contentOf = async (e?: Entry) => (e && regular(e.mode) ? store.readBlob(e.oid) : null);
    // A file that stays a file is overwritten in place, and what it held is filed in the recycle area in one go
    // (an unlink and a new file each would cost the deletion machinery per file).
    const replaced: { path: string; entry: Entry }[] = [];
    const changes = (await store.fileChanges(now, then)).filter((x) => under(x.path));
    // Paths differ from each other: up to 8 at a time (reading blobs and writing files overlap).
    await mapLimit(changes, 8, async (c) => {
      // Same bytes and mode, only times or owner differ: the file is as it was.
      if (c.before && c.after && c.before.oid === c.after.oid && c.before.mode === c.after.mode) return;
      try {
        if (c.after && mayRead && !(await mayRead(then, c.path))) throw new Error(`you could not read it at ${commit.slice(0, 12)} through the mount, so it is not restored`);
        // An append-only file (the journal) may only grow: its content now must be the start of the restored one.
        const growth = isAppendOnly(view.rules, c.path) ? checkRestore(view.rules, c.path, await contentOf(c.before), await contentOf(c.after)) : null;
        if (growth) throw new Error(growth);
        const inPlace = regular(c.before?.mode) && regular(c.after?.mode);
        if (c.before && !inPlace) await view.unlink(c.path);
        // With the mode, owner and times its record kept at that commit.
        const meta = c.after && (await store.meta(then, c.path, c.after.mode));
        if (c.after) await view.restore(c.path, kindOfMode(c.after.mode), await store.readBlob(c.after.oid), { commit: false, replace: true, meta });
        if (inPlace) replaced.push({ path: c.path, entry: c.before! });
        if (c.after && regular(c.after.mode)) await this.readers.record(who, [{ path: c.path, oid: c.after.oid }]);
        (c.after ? out.restored : out.removed).push(c.path);
      } catch (err) {
        out.refused.push({ path: c.path, reason: (err as Error).message });
      }
    });
    // Folders get back their records last, deepest first: putting files in them moved their times.
    const folders = (await store.folderChanges(now, then)).filter((f) => under(f.path)).reverse();
    for (const f of folders) {
      const meta = await store.meta(then, f.path, MODE.tree);
      if (!meta || !(await view.exists(f.path))) continue;
      try {
        await view.dirMeta(f.path, meta);
      } catch (err) {
        out.refused.push({ path: `${f.path}/`, reason: (err as Error).message });
      }
    }
    for (const list of [out.restored, out.removed]) list.sort();
    const home = this.homes.homeOf(role);
    if (replaced.length > 0) await home.trash.add(await itemsFromGit(store, replaced, branch, view.run, now));
    await view.sync();
    out.head = view.head;
    return out;
  }
}
