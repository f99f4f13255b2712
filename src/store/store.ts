import fs from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import { spawn } from 'node:child_process';
import NodeGit from 'nodegit';
import { TreeCache, parseTree } from './tree-cache.js';
import { applyEdits, editTrie, isSimpleEdit, type Edits } from './tree-edit.js';
import { fullMode, isMetaPath, META_ROOT, metaSubject, parseMeta, recordFits, recordPath, type FileMeta } from './file-meta.js';
import { MODE, type Change, type ObjectCounts, type CommitInfo, type Entry, type Identity, type MergeConflict, type NewCommit, type Tree } from './types.js';

/**
 * The Store: one bare git repository per Home. The only module that talks to git.
 * Objects are immutable, so trees and blob sizes are cached by id; refs move only by compare-and-swap.
 */

export * from './types.js';


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

/**
 * git talking to a remote: no password prompt, and only the transports `nas remote add` accepts, so a URL that
 * reached the Store's config some other way still runs no remote helper (`<helper>::...`) as root.
 */
const REMOTE_GIT = ['-c', 'core.askPass=true', '-c', 'protocol.allow=never',
  ...['https', 'ssh', 'git', 'file'].flatMap((p) => ['-c', `protocol.${p}.allow=always`])];

export class Store {
  private readonly trees = new TreeCache(TREE_CACHE_ENTRIES);
  private readonly sizes = new Map<string, number>();
  private readonly metas = new Map<string, FileMeta | null>();
  private readonly refLocks = new Map<string, Promise<unknown>>();

  private constructor(readonly path: string, private readonly repo: any, private readonly odb: any) {}

  /** Create a bare repository at path (or open the one there). */
  static async init(path: string): Promise<Store> {
    const repo = await NodeGit.Repository.init(path, 1);
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
        if (expected === null) await NodeGit.Reference.create(this.repo, name, NodeGit.Oid.fromString(target), 0, log);
        else await NodeGit.Reference.createMatching(this.repo, name, NodeGit.Oid.fromString(target), 1, NodeGit.Oid.fromString(expected), log);
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
      await NodeGit.Reference.remove(this.repo, name);
    });
  }

  /** Point HEAD at a branch, so that `git clone` of the Store checks it out. */
  async setHead(ref: string): Promise<void> {
    await NodeGit.Reference.symbolicCreate(this.repo, 'HEAD', ref, 1, 'nas: HEAD');
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
    const oid = await NodeGit.Blob.createFromBuffer(this.repo, buf, buf.length);
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
    const oid = await NodeGit.Blob.createFromDisk(this.repo, path);
    return oid.tostrS();
  }

  /**
   * Hash the file an open descriptor refers to into the object database: by git's own command (see
   * writeBlobFromFile), or by libgit2 through /proc when git is not there.
   */
  async writeBlobFromFd(fd: number): Promise<string> {
    try {
      return await this.gitHashObject(fd);
    } catch {
      return (await NodeGit.Blob.createFromDisk(this.repo, `/proc/self/fd/${fd}`)).tostrS();
    }
  }

  /**
   * Pack loose objects and drop unreachable ones old enough (`git gc --auto`: only when git finds it worth it).
   * Runs as its own process; safe beside nasd's writes (git keeps recent unreachable objects two weeks).
   */
  async gc(): Promise<void> {
    await this.oneGcAtATime(() => this.git(['gc', '--auto', '--quiet']));
  }

  /**
   * Pack every object now and drop unreachable ones older than `pruneAfterSeconds` (never younger than an
   * hour: an object nasd has just written may not be on a ref yet).
   */
  async pack(pruneAfterSeconds: number): Promise<void> {
    await this.oneGcAtATime(() => this.git(['gc', '--quiet', `--prune=${Math.max(3600, Math.floor(pruneAfterSeconds))}.seconds.ago`]));
  }

  /** git refuses a second gc on a repository while one runs: nasd's own (hourly, maintenance) take turns. */
  private gcQueue: Promise<unknown> = Promise.resolve();

  private oneGcAtATime<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.gcQueue.then(fn, fn);
    this.gcQueue = next.catch(() => undefined);
    return next;
  }

  /** What the object store holds: loose objects and their bytes, packed objects and the packs' bytes. */
  async objectCounts(): Promise<ObjectCounts> {
    const out = Object.fromEntries((await this.git(['count-objects', '-v'])).split('\n').map((l) => l.split(': ')).filter((kv) => kv.length === 2));
    const n = (key: string) => Number(out[key] ?? 0);
    return { loose: n('count'), looseBytes: n('size') * 1024, packed: n('in-pack'), packBytes: n('size-pack') * 1024 };
  }

  /** Write every ref and everything they reach into one file (a git bundle), which `fetchBundle` reads back. */
  async bundle(file: string): Promise<void> {
    await this.git(['bundle', 'create', '--quiet', file, '--all']);
  }

  /** Take every ref of a bundle as it is (this Store is new and empty); git checks the bundle whole first. */
  async fetchBundle(file: string): Promise<void> {
    await this.git(['bundle', 'verify', '--quiet', file]);
    await this.git(['fetch', '--quiet', '--no-write-fetch-head', file, '+refs/*:refs/*']);
  }

  /** The remotes this Store mirrors to (`nas remote add`), by name: kept in the Store's own git config, never exported. */
  async mirrors(): Promise<Map<string, string>> {
    const out = await this.git(['config', '--get-regexp', '^remote\\.nas-[0-9]+\\.url$']).catch(() => '');
    return new Map(out.split('\n').filter(Boolean).map((l) => {
      const [key, url] = [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)];
      return [key.replace(/^remote\./, '').replace(/\.url$/, ''), url];
    }));
  }

  /** How many refs a remote holds (`git ls-remote`), failing with git's words when it cannot be reached. */
  async remoteRefCount(url: string, timeoutMs = 60_000): Promise<number> {
    return (await this.git([...REMOTE_GIT, 'ls-remote', '--', url], 'ignore', timeoutMs)).split('\n').filter(Boolean).length;
  }

  async addMirror(name: string, url: string): Promise<void> {
    await this.git(['remote', 'add', '--mirror=push', name, url]);
  }

  async removeMirror(name: string): Promise<void> {
    await this.git(['remote', 'remove', name]);
  }

  /** Push every ref to a mirror, removing there what is gone here; stopped after `timeoutMs`. */
  async pushMirror(name: string, timeoutMs = 120_000): Promise<void> {
    await this.git([...REMOTE_GIT, 'push', '--mirror', '--quiet', name], 'ignore', timeoutMs);
  }

  /** Install (or replace) a hook script of this repository. */
  async installHook(name: string, script: string): Promise<void> {
    const file = `${this.path}/hooks/${name}`;
    if ((await fs.readFile(file, 'utf8').catch(() => null)) === script) return;
    await fs.mkdir(`${this.path}/hooks`, { recursive: true });
    await fs.writeFile(`${file}.tmp`, script, { mode: 0o755 });
    await fs.rename(`${file}.tmp`, file);
  }

  /** Run git on this Store as its own process: its stdout, or an error with git's own words (killed after `timeoutMs`). */
  private git(args: string[], stdin: 'ignore' | number = 'ignore', timeoutMs = 0): Promise<string> {
    return new Promise((resolve, reject) => {
      // No terminal prompts: a remote that wants a password fails instead of waiting forever.
      const env = { ...process.env, GIT_TERMINAL_PROMPT: '0' };
      const child = spawn('git', ['--git-dir', this.path, ...args], { stdio: [stdin, 'pipe', 'pipe'], env });
      let out = '';
      let err = '';
      const timer = timeoutMs > 0 ? setTimeout(() => child.kill('SIGKILL'), timeoutMs) : undefined;
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (err += d));
      child.on('error', reject);
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve(out);
        else reject(new Error(`git ${args.join(' ')}: ${err.trim() || (signal ? `stopped after ${timeoutMs / 1000} s` : `exit ${code}`)}`));
      });
    });
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

  private async gitHashObject(fd: number): Promise<string> {
    const oid = (await this.git(['-c', 'core.looseCompression=0', 'hash-object', '-w', '--no-filters', '--stdin'], fd)).trim();
    if (!/^[0-9a-f]{40}$/.test(oid)) throw new Error(`git hash-object printed ${JSON.stringify(oid)}`);
    return oid;
  }

  async writeTree(entries: Tree): Promise<string> {
    const builder = await NodeGit.Treebuilder.create(this.repo, null);
    for (const [name, e] of entries) await builder.insert(name, NodeGit.Oid.fromString(e.oid), e.mode);
    const oid = await builder.write();
    return typeof oid === 'string' ? oid : oid.tostrS();
  }

  /**
   * A new tree: `root` (null for empty) with `changes` applied, each a path mapped to its new entry or null to
   * delete it (a directory path deletes the whole subtree). Only the directories on changed paths are rewritten;
   * directories left empty disappear, as git cannot hold them.
   */
  async editTree(root: string | null, changes: Edits): Promise<string> {
    if (changes.size === 0) return root ?? (await this.writeTree(new Map()));
    if (await isSimpleEdit((path) => (root ? this.lookupPath(root, path) : Promise.resolve(null)), changes)) {
      // libgit2 applies them in C, rewriting each touched directory once: no per-entry JavaScript.
      const base = await NodeGit.Tree.lookup(this.repo, NodeGit.Oid.fromString(root ?? (await this.writeTree(new Map()))));
      const updates = [...changes].map(([path, entry]) => {
        const u = new NodeGit.TreeUpdate();
        u.action = entry ? NodeGit.Tree.UPDATE.UPSERT : NodeGit.Tree.UPDATE.REMOVE;
        u.path = path;
        u.filemode = entry?.mode ?? 0;
        if (entry) u.id = NodeGit.Oid.fromString(entry.oid);
        return u;
      });
      return (await base.createUpdated(this.repo, updates.length, updates)).tostrS();
    }
    const out = await applyEdits(this, root, editTrie(changes));
    return out ?? (await this.writeTree(new Map()));
  }

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
   * The files that differ between two trees (null: the empty tree). Only subtrees whose ids differ are
   * read, so the cost follows the size of the change, not of the Home.
   */
  async changes(before: string | null, after: string | null, prefix = ''): Promise<Change[]> {
    if (before === after) return [];
    const a = before ? await this.readTree(before) : new Map<string, Entry>();
    const b = after ? await this.readTree(after) : new Map<string, Entry>();
    const out: Change[] = [];
    for (const name of [...new Set([...a.keys(), ...b.keys()])].sort()) {
      const x = a.get(name);
      const y = b.get(name);
      if (x?.oid === y?.oid && x?.mode === y?.mode) continue;
      const path = prefix + name;
      const xTree = x?.mode === MODE.tree ? x : undefined;
      const yTree = y?.mode === MODE.tree ? y : undefined;
      if (xTree || yTree) out.push(...(await this.changes(xTree?.oid ?? null, yTree?.oid ?? null, `${path}/`)));
      const xFile = x && !xTree ? x : undefined;
      const yFile = y && !yTree ? y : undefined;
      if (xFile && yFile) out.push({ path, status: 'modified', before: xFile, after: yFile });
      else if (xFile) out.push({ path, status: 'deleted', before: xFile });
      else if (yFile) out.push({ path, status: 'added', after: yFile });
    }
    return out;
  }

  /**
   * The files that differ between two trees as a person sees them: a change of a file's metadata record
   * (file-meta.ts) is a change of that file, and records never show as files of their own.
   */
  async fileChanges(before: string | null, after: string | null): Promise<Change[]> {
    const all = await this.changes(before, after);
    const files = all.filter((c) => !isMetaPath(c.path));
    const listed = new Set(files.map((c) => c.path));
    for (const c of all) {
      if (!isMetaPath(c.path)) continue;
      // A directory's own record is its mode, owner and times: not a file a person reviews.
      const { path, dir } = metaSubject(c.path);
      if (dir || listed.has(path)) continue;
      const [was, now] = await Promise.all([before, after].map((t) => (t ? this.lookupPath(t, path) : null)));
      if (!was || !now || was.mode === MODE.tree || now.mode === MODE.tree) continue; // the file itself came or went: listed already, or gone with its record
      files.push({ path, status: 'modified', before: was, after: now });
      listed.add(path);
    }
    return files;
  }

  /**
   * The directories whose own record (mode, owner, times) the second tree changed, where it holds them: what
   * fileChanges leaves out, for a PR to list as folders.
   */
  async folderChanges(before: string | null, after: string | null): Promise<string[]> {
    const out: string[] = [];
    for (const c of await this.changes(await this.recordsOf(before), await this.recordsOf(after), `${META_ROOT}/`)) {
      const { path, dir } = metaSubject(c.path);
      if (dir && c.after && after && (await this.lookupPath(after, path))?.mode === MODE.tree) out.push(path);
    }
    return out;
  }

  /**
   * The unified diff between two trees as git prints it (binary files are named, not shown; metadata records
   * left out), one piece per file (from its `diff --git` line), by path. libgit2 prints one piece per delta, in
   * the order of its deltas, and no line of a hunk begins with `diff --git`.
   */
  async diffByFile(before: string, after: string): Promise<Map<string, string>> {
    const [a, b] = await Promise.all([before, after].map(async (t) => this.repo.getTree(await this.withoutMeta(t))));
    const diff = await NodeGit.Diff.treeToTree(this.repo, a, b, null);
    const pieces = String(await diff.toBuf(NodeGit.Diff.FORMAT.PATCH)).split(/(?=^diff --git )/m).filter((p) => p.startsWith('diff --git '));
    const count: number = diff.numDeltas();
    if (pieces.length !== count) throw new Error(`the diff has ${count} files but ${pieces.length} pieces of patch`);
    const out = new Map<string, string>();
    for (let i = 0; i < count; i++) {
      const delta = diff.getDelta(i);
      out.set(String(delta.newFile().path() ?? delta.oldFile().path()), pieces[i]);
    }
    return out;
  }

  /** The full mode (setuid, setgid and sticky bits included) a tree's metadata record gives what is at rel. */
  async fullModeAt(tree: string, rel: string, entry: Entry): Promise<number> {
    return fullMode(entry.mode, await this.meta(tree, rel, entry.mode));
  }

  /**
   * libgit2's three-way merge of trees: text files merge line by line, anything else only when one side
   * alone changed it. Returns the merged tree, or every path that conflicts (nothing is written then).
   */
  async mergeTrees(base: string, ours: string, theirs: string): Promise<{ tree: string } | { conflicts: MergeConflict[] }> {
    const [b, o, t] = await Promise.all([base, ours, theirs].map((oid) => this.repo.getTree(oid)));
    const index = await NodeGit.Merge.trees(this.repo, b, o, t, null);
    if (!index.hasConflicts()) return { tree: (await index.writeTreeTo(this.repo)).tostrS() };
    const byPath = new Map<string, MergeConflict>();
    for (const e of index.entries()) {
      const stage = NodeGit.Index.entryStage(e);
      if (stage === 0) continue;
      const c: MergeConflict = byPath.get(e.path) ?? { path: String(e.path) };
      c[(['base', 'ours', 'theirs'] as const)[stage - 1]] = { oid: e.id.tostrS(), mode: e.mode };
      byPath.set(e.path, c);
    }
    return { conflicts: [...byPath.values()] };
  }

  /** The best common ancestor of two commits, or null when they share no history. */
  async mergeBase(a: string, b: string): Promise<string | null> {
    try {
      return (await NodeGit.Merge.base(this.repo, NodeGit.Oid.fromString(a), NodeGit.Oid.fromString(b))).tostrS();
    } catch (err) {
      if (/no merge base/i.test((err as Error).message)) return null;
      throw err;
    }
  }

  async writeCommit(c: NewCommit): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const author = NodeGit.Signature.create(c.author.name, c.author.email, now, 0);
    const committer = c.committer ? NodeGit.Signature.create(c.committer.name, c.committer.email, now, 0) : author;
    const oid = await this.repo.createCommit(null, author, committer, c.message, c.tree, c.parents);
    return oid.tostrS();
  }
}
