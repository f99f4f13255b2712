import fs from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import NodeGit from 'nodegit';
import { TreeCache, parseTree } from './tree-cache.js';
import { LastChange } from './last-change.js';
import { applyEdits, applySimpleEdits, editTrie, isSimpleEdit, type Edits } from './tree-edit.js';
import { fullMode, META_ROOT, parseMeta, recordFits, recordPath, type FileMeta } from './file-meta.js';
import * as history from './history.js';
import { GitCommands } from './git-commands.js';
import { RawObjects } from './raw-objects.js';
import { ServerRepo, type ServerAccess } from './server-repo.js';
import { MODE, type Change, type FolderChange, type ObjectCounts, type CommitInfo, type Entry, type Identity, type MergeConflict, type NewCommit, type Tree } from './types.js';
import { oneWriter } from './one-writer.js';

/**
 * The Store: one bare git repository per Home. The only module that talks to git, and the one entry point
 * callers use. This file holds objects and refs: objects are immutable, so trees and blob sizes are cached by
 * id; refs move only by compare-and-swap. The Store hands the rest to its neighbours: history.ts (changes,
 * diffs, merges) and git-commands.ts (what runs git as a process: gc, bundles, mirrors, hooks).
 */

export * from './types.js';
export { FsckRefusal } from './git-commands.js';
export { StalePush, type ServerAccess, type ServerRepo } from './server-repo.js';

/** A ref did not hold the value a writer expected: someone else moved it first. */
export class RefConflict extends Error {
  constructor(readonly ref: string, readonly expected: string | null, readonly actual: string | null) {
    super(`ref ${ref} moved: expected ${expected ?? '(absent)'}, found ${actual ?? '(absent)'}`);
    this.name = 'RefConflict';
  }
}

/** Files from this size are hashed by git's own command (see writeBlobFromFile). */
const STREAM_FROM_BYTES = 64 << 20;

/** About 60 MB of parsed tree entries. */
const TREE_CACHE_ENTRIES = 400_000;

export class Store {
  private readonly trees = new TreeCache(TREE_CACHE_ENTRIES);
  private readonly sizes = new Map<string, number>();
  private readonly metas = new Map<string, FileMeta | null>();
  private readonly refLocks = new Map<string, Promise<unknown>>();
  /** When each path last changed, per commit (last-change.ts). */
  readonly lastChange = new LastChange(this);
  private readonly git: GitCommands;

  /** Objects as git stores them, in and out (raw-objects.ts). */
  readonly raw: RawObjects;

  private constructor(readonly path: string, private readonly repo: any, private readonly odb: any) {
    this.git = new GitCommands(path);
    this.raw = new RawObjects(odb);
  }

  /** Create a bare repository at path (or open the one there). */
  static async init(path: string): Promise<Store> {
    const repo = await oneWriter(() => NodeGit.Repository.init(path, 1));
    return new Store(path, repo, await repo.odb());
  }

  static async open(path: string): Promise<Store> {
    const repo = await NodeGit.Repository.openBare(path);
    return new Store(path, repo, await repo.odb());
  }

  // ---- refs -------------------------------------------------------------------------------------

  /** A ref's target, or null when there is no such ref. Any other failure (out of descriptors, I/O) is thrown. */
  async readRef(name: string): Promise<string | null> {
    try {
      const oid = await NodeGit.Reference.nameToId(this.repo, name);
      return oid.tostrS();
    } catch (e) {
      // libgit2's GIT_ENOTFOUND is -3; an unborn or missing ref is the only "no".
      if ((e as { errno?: number }).errno === -3 || /not found|no reference/i.test((e as Error).message ?? '')) return null;
      throw e;
    }
  }

  /** All refs whose name starts with prefix, with their targets. */
  async listRefs(prefix: string): Promise<Map<string, string>> {
    const names: string[] = await NodeGit.Reference.list(this.repo);
    const out = new Map<string, string>();
    for (const name of names.filter((n) => n.startsWith(prefix)).sort()) {
      const oid = await this.readRef(name);
      if (oid) out.set(name, oid);
    }
    return out;
  }

  /**
   * Move ref `name` to `target` only if it still points at `expected` (null: only if it does not exist).
   * Writers in this process are serialised per ref; libgit2's matching update guards against other processes.
   */
  async updateRef(name: string, target: string, expected: string | null, log: string): Promise<void> {
    await this.withRefLock(name, async () => {
      const actual = await this.readRef(name);
      if (actual !== expected) throw new RefConflict(name, expected, actual);
      try {
        if (expected === null) await oneWriter(() => NodeGit.Reference.create(this.repo, name, NodeGit.Oid.fromString(target), 0, log));
        else await oneWriter(() => NodeGit.Reference.createMatching(this.repo, name, NodeGit.Oid.fromString(target), 1, NodeGit.Oid.fromString(expected), log));
      } catch (e) {
        const now = await this.readRef(name);
        if (now !== expected) throw new RefConflict(name, expected, now);
        throw e;
      }
    });
  }

  /** Delete a ref, if it still points where the caller saw it. */
  async deleteRef(name: string, expected: string): Promise<void> {
    await this.withRefLock(name, async () => {
      const actual = await this.readRef(name);
      if (actual !== expected) throw new RefConflict(name, expected, actual);
      await oneWriter(() => NodeGit.Reference.remove(this.repo, name));
    });
  }

  /** Point HEAD at a branch, so that `git clone` of the Store checks it out. */
  async setHead(ref: string): Promise<void> {
    await oneWriter(() => NodeGit.Reference.symbolicCreate(this.repo, 'HEAD', ref, 1, 'nas: HEAD'));
  }

  private async withRefLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.refLocks.get(name) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const settled = run.catch(() => undefined);
    this.refLocks.set(name, settled);
    try {
      return await run;
    } finally {
      if (this.refLocks.get(name) === settled) this.refLocks.delete(name);
    }
  }

  // ---- reading objects --------------------------------------------------------------------------

  /** The commit a full or abbreviated (4+ hex digits) commit id names in this Store, or null. */
  async findCommit(spec: string): Promise<string | null> {
    if (!/^[0-9a-f]{4,40}$/i.test(spec)) return null;
    try {
      const obj = await NodeGit.Revparse.single(this.repo, spec);
      const commit = await obj.peel(NodeGit.Object.TYPE.COMMIT);
      return commit.id().tostrS();
    } catch {
      return null;
    }
  }

  async readCommit(oid: string): Promise<CommitInfo> {
    const commit = await this.repo.getCommit(oid);
    return {
      oid,
      tree: commit.treeId().tostrS(),
      parents: commit.parents().map((p: any) => p.tostrS()),
      time: commit.time(),
      message: commit.message(),
    };
  }

  async readTree(oid: string): Promise<Tree> {
    const cached = this.trees.get(oid);
    if (cached) return cached;
    // One raw object parsed here, rather than a native wrapper for every entry.
    const obj = await this.odb.read(NodeGit.Oid.fromString(oid));
    if (obj.type() !== NodeGit.Object.TYPE.TREE) throw new Error(`${oid} is not a tree`);
    const entries = parseTree(obj.data().toBuffer(obj.size()));
    this.trees.set(oid, entries);
    return entries;
  }

  /** The entry at a '/'-separated path below tree `root`, or null. '' is the root itself. */
  async lookupPath(root: string, path: string): Promise<Entry | null> {
    let entry: Entry = { oid: root, mode: MODE.tree };
    if (path === '') return entry;
    for (const name of path.split('/')) {
      if (entry.mode !== MODE.tree) return null;
      const next = (await this.readTree(entry.oid)).get(name);
      if (!next) return null;
      entry = next;
    }
    return entry;
  }

  async readBlob(oid: string): Promise<Buffer> {
    const blob = await this.repo.getBlob(oid);
    const content: Buffer = Buffer.from(blob.content());
    this.sizes.set(oid, content.length);
    return content;
  }

  /**
   * The metadata record kept in a tree for rel, which git holds with `gitMode` (see file-meta.ts): null when
   * there is none, it is damaged, or it describes another kind of thing (a file's record for a directory).
   */
  async meta(tree: string, rel: string, gitMode: number): Promise<FileMeta | null> {
    const entry = await this.lookupPath(tree, recordPath(rel, gitMode));
    if (!entry || entry.mode === MODE.tree) return null;
    const meta = await this.readMeta(entry.oid);
    return meta && recordFits(meta, gitMode) ? meta : null;
  }

  /** The full mode (setuid, setgid and sticky bits included) a tree's metadata record gives what is at rel. */
  async fullModeAt(tree: string, rel: string, entry: Entry): Promise<number> {
    return fullMode(entry.mode, await this.meta(tree, rel, entry.mode));
  }

  /** A metadata record's blob, parsed (null when damaged). */
  async readMeta(oid: string): Promise<FileMeta | null> {
    let meta = this.metas.get(oid);
    if (meta === undefined) {
      meta = parseMeta((await this.readBlob(oid)).toString());
      // Records are tiny and immutable by id; forget them all now and then rather than track use.
      if (this.metas.size > 200_000) this.metas.clear();
      this.metas.set(oid, meta);
    }
    return meta;
  }

  /** The tree of a tree's metadata records (`.nas-meta/`), or null when it has none. */
  async recordsOf(tree: string | null): Promise<string | null> {
    return tree ? ((await this.lookupPath(tree, META_ROOT))?.oid ?? null) : null;
  }

  /** A tree without its metadata records (for diffs and content merges). */
  async withoutMeta(tree: string): Promise<string> {
    return (await this.lookupPath(tree, META_ROOT)) ? this.editTree(tree, new Map([[META_ROOT, null]])) : tree;
  }

  async blobSize(oid: string): Promise<number> {
    const known = this.sizes.get(oid);
    if (known !== undefined) return known;
    const blob = await this.repo.getBlob(oid);
    const size = Number(blob.rawsize());
    this.sizes.set(oid, size);
    return size;
  }

  // ---- writing objects --------------------------------------------------------------------------

  async writeBlob(content: Buffer | string): Promise<string> {
    const buf = typeof content === 'string' ? Buffer.from(content) : content;
    const oid = await oneWriter(() => NodeGit.Blob.createFromBuffer(this.repo, buf, buf.length));
    const hex = oid.tostrS();
    this.sizes.set(hex, buf.length);
    return hex;
  }

  /**
   * Hash a file on disk into the object database without reading it into JavaScript. A large file is
   * handed to git itself, stored uncompressed: libgit2 always deflates, which caps it near 35 MB/s here
   * (git with core.looseCompression=0 runs near disk speed; packing later compresses).
   */
  async writeBlobFromFile(path: string): Promise<string> {
    // Never through a link: what stands at path is hashed, not what it points to (libgit2 does the same below).
    if ((await fs.lstat(path)).size >= STREAM_FROM_BYTES) {
      const fh = await fs.open(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
      try {
        return await this.writeBlobFromFd(fh.fd);
      } finally {
        await fh.close();
      }
    }
    const oid = await oneWriter(() => NodeGit.Blob.createFromDisk(this.repo, path));
    return oid.tostrS();
  }

  /**
   * Hash the file an open descriptor refers to into the object database: by git's own command (see
   * writeBlobFromFile), or by libgit2 through /proc when git is not there.
   */
  async writeBlobFromFd(fd: number): Promise<string> {
    try {
      return await this.git.hashObject(fd);
    } catch {
      return (await oneWriter(() => NodeGit.Blob.createFromDisk(this.repo, `/proc/self/fd/${fd}`))).tostrS();
    }
  }

  async writeTree(entries: Tree): Promise<string> {
    const builder = await NodeGit.Treebuilder.create(this.repo, null);
    for (const [name, e] of entries) await builder.insert(name, NodeGit.Oid.fromString(e.oid), e.mode);
    const oid = await oneWriter(() => builder.write());
    return typeof oid === 'string' ? oid : oid.tostrS();
  }

  async writeCommit(c: NewCommit): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const author = NodeGit.Signature.create(c.author.name, c.author.email, now, 0);
    const committer = c.committer ? NodeGit.Signature.create(c.committer.name, c.committer.email, now, 0) : author;
    const oid = await oneWriter(() => this.repo.createCommit(null, author, committer, c.message, c.tree, c.parents));
    return oid.tostrS();
  }

  /**
   * A new tree: `root` (null for empty) with `changes` applied, each a path mapped to its new entry or null to
   * delete it (a directory path deletes the whole subtree). Only the directories on changed paths are rewritten;
   * directories left empty disappear, as git cannot hold them.
   */
  async editTree(root: string | null, changes: Edits): Promise<string> {
    if (changes.size === 0) return root ?? (await this.writeTree(new Map()));
    if (await isSimpleEdit((path) => (root ? this.lookupPath(root, path) : Promise.resolve(null)), changes)) {
      return applySimpleEdits(this.repo, root ?? (await this.writeTree(new Map())), changes);
    }
    const out = await applyEdits(this, root, editTrie(changes));
    return out ?? (await this.writeTree(new Map()));
  }

  // ---- committing onto refs ---------------------------------------------------------------------

  /**
   * The one way anything moves a ref to new content: write a commit of `tree` whose first parent is the
   * ref's current head (`head`, null for a new ref), then move the ref from `head` by compare-and-swap.
   * Throws RefConflict when someone else moved the ref first.
   */
  async commitTree(ref: string, c: { head: string | null; tree: string; message: string; author: Identity; committer?: Identity; otherParents?: string[] }): Promise<string> {
    const parents = [...(c.head ? [c.head] : []), ...(c.otherParents ?? [])];
    const commit = await this.writeCommit({ tree: c.tree, parents, message: c.message, author: c.author, committer: c.committer });
    await this.updateRef(ref, commit, c.head, c.message.split('\n')[0]);
    return commit;
  }

  /**
   * Edit the tree of `head` (null: start empty) and commit it onto `ref` by compare-and-swap. Returns the new
   * commit, or null when the edits change nothing (then nothing is written).
   */
  async commitChanges(ref: string, c: { head: string | null; changes: Edits; message: string; author: Identity }): Promise<string | null> {
    const base = c.head ? (await this.readCommit(c.head)).tree : null;
    const tree = await this.editTree(base, c.changes);
    if (tree === base) return null;
    return this.commitTree(ref, { head: c.head, tree, message: c.message, author: c.author });
  }

  /**
   * Commit edits onto a metadata ref (branch records, recycle area), retrying when another writer moved it
   * first. `edit` gets the current tree (null if the ref is new) and returns the changes, or null for none.
   */
  async commitToRef(ref: string, edit: (tree: string | null) => Promise<Edits | null>, message: string, author: Identity): Promise<void> {
    for (;;) {
      const head = await this.readRef(ref);
      const changes = await edit(head ? (await this.readCommit(head)).tree : null);
      if (!changes || changes.size === 0) return;
      try {
        await this.commitChanges(ref, { head, changes, message, author });
        return;
      } catch (e) {
        if (!(e instanceof RefConflict)) throw e;
      }
    }
  }

  /**
   * Replace a metadata ref's content with `tree` as a commit without parents (its old history becomes
   * unreachable, so gc can reclaim it), by compare-and-swap from `head`.
   */
  async restartRef(ref: string, head: string, tree: string, message: string, author: Identity): Promise<string> {
    const commit = await this.writeCommit({ tree, parents: [], message, author });
    await this.updateRef(ref, commit, head, message.split('\n')[0]);
    return commit;
  }

  // ---- history (history.ts) ----------------------------------------------------------------------

  /** The files that differ between two trees (null: the empty tree), metadata records included as stored. */
  changes(before: string | null, after: string | null, prefix = ''): Promise<Change[]> {
    return history.changes(this, before, after, prefix);
  }

  /** The files that differ between two trees as a person sees them (a record's change is its file's). */
  fileChanges(before: string | null, after: string | null): Promise<Change[]> {
    return history.fileChanges(this, before, after);
  }

  /** The folders the second tree adds, or whose own record (mode, owner, times) it changed. */
  folderChanges(before: string | null, after: string | null): Promise<FolderChange[]> {
    return history.folderChanges(this, before, after);
  }

  /** The unified diff between two trees as git prints it, one piece per file, by path. */
  diffByFile(before: string, after: string): Promise<Map<string, string>> {
    return history.diffByFile(this.repo, this, before, after);
  }

  /** libgit2's three-way merge of trees: the merged tree, or every path that conflicts. */
  mergeTrees(base: string, ours: string, theirs: string): Promise<{ tree: string } | { conflicts: MergeConflict[] }> {
    return history.mergeTrees(this.repo, base, ours, theirs);
  }

  /** The best common ancestor of two commits, or null when they share no history. */
  mergeBase(a: string, b: string): Promise<string | null> {
    return history.mergeBase(this.repo, a, b);
  }

  // ---- git commands (git-commands.ts) -------------------------------------------------------------

  /** `git gc --auto`: pack and prune only when git finds it worth it. */
  gc(): Promise<void> {
    return this.git.gc();
  }

  /** Pack every object now; drop unreachable ones older than `pruneAfterSeconds` (an hour at the least). */
  pack(pruneAfterSeconds: number): Promise<void> {
    return this.git.pack(pruneAfterSeconds);
  }

  /** Loose and packed objects, and their bytes. */
  objectCounts(): Promise<ObjectCounts> {
    return this.git.objectCounts();
  }

  /** Every ref and all they reach, into one git bundle file. */
  bundle(file: string): Promise<void> {
    return this.git.bundle(file);
  }

  /** Every ref of a bundle, taken as it is (this Store is new and empty). */
  fetchBundle(file: string): Promise<void> {
    return this.git.fetchBundle(file);
  }

  /** The remotes this Store mirrors to, by name. */
  mirrors(): Promise<Map<string, string>> {
    return this.git.mirrors();
  }

  /** A repository elsewhere's default branch with all its history, into `ref` (see GitCommands): its name there. */
  fetchDefaultBranch(url: string, ref: string, timeoutMs = 15 * 60_000): Promise<string> {
    return this.git.fetchDefaultBranch(url, ref, timeoutMs);
  }

  /** How many refs a remote holds, failing with git's words when it cannot be reached. */
  remoteRefCount(url: string, timeoutMs = 60_000): Promise<number> {
    return this.git.remoteRefCount(url, timeoutMs);
  }

  addMirror = (name: string, url: string): Promise<void> => this.git.addMirror(name, url);
  removeMirror = (name: string): Promise<void> => this.git.removeMirror(name);

  /** This Store's repository on the cluster's git server (src/cluster): one URL, its credentials, a deadline per call. */
  server = (url: string, access: ServerAccess): ServerRepo => new ServerRepo(this.git, url, access);

  /** Push every ref to a mirror, removing there what is gone here; stopped after `timeoutMs`. */
  pushMirror = (name: string, timeoutMs = 120_000): Promise<void> => this.git.pushMirror(name, timeoutMs);

  /** Install (or replace) a hook script of this repository. */
  installHook = (name: string, script: string): Promise<void> => this.git.installHook(name, script);
}