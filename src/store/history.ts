import NodeGit from 'nodegit';
import { isMetaPath, META_ROOT, metaSubject } from './file-meta.js';
import { MODE, type Change, type Entry, type FolderChange, type MergeConflict, type Tree } from './types.js';
import { oneWriter } from './one-writer.js';

/**
 * History: how two trees or commits relate. What changed between them (as stored, and as a person sees it),
 * their diff as git prints it, their three-way merge and their common ancestor. Reads only; writes nothing
 * but the tree of a clean merge.
 */

/** What history reads from the object store (the Store, whose caches it thereby shares). */
export interface TreeReader {
  readTree(oid: string): Promise<Tree>;
  lookupPath(root: string, path: string): Promise<Entry | null>;
  recordsOf(tree: string | null): Promise<string | null>;
  withoutMeta(tree: string): Promise<string>;
}

/**
 * The files that differ between two trees (null: the empty tree). Only subtrees whose ids differ are
 * read, so the cost follows the size of the change, not of the Home.
 */
export async function changes(trees: TreeReader, before: string | null, after: string | null, prefix = ''): Promise<Change[]> {
  if (before === after) return [];
  const a = before ? await trees.readTree(before) : new Map<string, Entry>();
  const b = after ? await trees.readTree(after) : new Map<string, Entry>();
  const out: Change[] = [];
  for (const name of [...new Set([...a.keys(), ...b.keys()])].sort()) {
    const x = a.get(name);
    const y = b.get(name);
    if (x?.oid === y?.oid && x?.mode === y?.mode) continue;
    const path = prefix + name;
    const xTree = x?.mode === MODE.tree ? x : undefined;
    const yTree = y?.mode === MODE.tree ? y : undefined;
    if (xTree || yTree) out.push(...(await changes(trees, xTree?.oid ?? null, yTree?.oid ?? null, `${path}/`)));
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
export async function fileChanges(trees: TreeReader, before: string | null, after: string | null): Promise<Change[]> {
  const all = await changes(trees, before, after);
  const files = all.filter((c) => !isMetaPath(c.path));
  const listed = new Set(files.map((c) => c.path));
  for (const c of all) {
    if (!isMetaPath(c.path)) continue;
    // A directory's own record is its mode, owner and times: not a file a person reviews.
    const { path, dir } = metaSubject(c.path);
    if (dir || listed.has(path)) continue;
    const [was, now] = await Promise.all([before, after].map((t) => (t ? trees.lookupPath(t, path) : null)));
    if (!was || !now || was.mode === MODE.tree || now.mode === MODE.tree) continue; // the file itself came or went: listed already, or gone with its record
    files.push({ path, status: 'modified', before: was, after: now });
    listed.add(path);
  }
  return files;
}

/**
 * The folders a person reviews as such, between two trees: those the second tree has and the first did not
 * (added, a record or not), and those whose own record (mode, owner, times) the second tree changed (modified,
 * or added where the first tree had no folder there). What fileChanges leaves out.
 */
export async function folderChanges(trees: TreeReader, before: string | null, after: string | null): Promise<FolderChange[]> {
  const out = new Map<string, FolderChange>();
  for (const path of await newFolders(trees, before, after)) out.set(path, { path, status: 'added' });
  for (const c of await changes(trees, await trees.recordsOf(before), await trees.recordsOf(after), `${META_ROOT}/`)) {
    const { path, dir } = metaSubject(c.path);
    if (!dir || !c.after || !after || out.has(path) || (await trees.lookupPath(after, path))?.mode !== MODE.tree) continue;
    const was = before ? await trees.lookupPath(before, path) : null;
    out.set(path, { path, status: was?.mode === MODE.tree ? 'modified' : 'added' });
  }
  return [...out.values()].sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
}

/** The folders of the second tree that the first does not have (records left out): only subtrees that differ are read. */
async function newFolders(trees: TreeReader, before: string | null, after: string | null, prefix = ''): Promise<string[]> {
  if (!after || before === after) return [];
  const a = before ? await trees.readTree(before) : new Map<string, Entry>();
  const out: string[] = [];
  for (const [name, y] of await trees.readTree(after)) {
    const x = a.get(name);
    if (y.mode !== MODE.tree || (prefix === '' && name === META_ROOT) || (x?.oid === y.oid && x.mode === y.mode)) continue;
    const was = x?.mode === MODE.tree ? x.oid : null;
    if (!was) out.push(prefix + name);
    out.push(...(await newFolders(trees, was, y.oid, `${prefix}${name}/`)));
  }
  return out;
}

/**
 * The unified diff between two trees as git prints it (binary files are named, not shown; metadata records
 * left out), one piece per file (from its `diff --git` line), by path. libgit2 prints one piece per delta, in
 * the order of its deltas, and no line of a hunk begins with `diff --git`.
 */
export async function diffByFile(repo: any, trees: TreeReader, before: string, after: string): Promise<Map<string, string>> {
  const [a, b] = await Promise.all([before, after].map(async (t) => repo.getTree(await trees.withoutMeta(t))));
  const diff = await NodeGit.Diff.treeToTree(repo, a, b, null);
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

/**
 * libgit2's three-way merge of trees: text files merge line by line, anything else only when one side
 * alone changed it. Returns the merged tree, or every path that conflicts (nothing is written then).
 */
export async function mergeTrees(repo: any, base: string, ours: string, theirs: string): Promise<{ tree: string } | { conflicts: MergeConflict[] }> {
  const [b, o, t] = await Promise.all([base, ours, theirs].map((oid) => repo.getTree(oid)));
  const index = await oneWriter(() => NodeGit.Merge.trees(repo, b, o, t, null)); // it writes the blobs it merges
  if (!index.hasConflicts()) return { tree: (await oneWriter(() => index.writeTreeTo(repo))).tostrS() };
  return { conflicts: conflictsOf(index) };
}

/** The conflicting paths of a merge index, with the entry each side (stages 1 to 3) holds. */
function conflictsOf(index: any): MergeConflict[] {
  const byPath = new Map<string, MergeConflict>();
  for (const e of index.entries()) {
    const stage = NodeGit.Index.entryStage(e);
    if (stage === 0) continue;
    const c: MergeConflict = byPath.get(e.path) ?? { path: String(e.path) };
    c[(['base', 'ours', 'theirs'] as const)[stage - 1]] = { oid: e.id.tostrS(), mode: e.mode };
    byPath.set(e.path, c);
  }
  return [...byPath.values()];
}

/** The best common ancestor of two commits, or null when they share no history. */
export async function mergeBase(repo: any, a: string, b: string): Promise<string | null> {
  try {
    return (await NodeGit.Merge.base(repo, NodeGit.Oid.fromString(a), NodeGit.Oid.fromString(b))).tostrS();
  } catch (err) {
    if (/no merge base/i.test((err as Error).message)) return null;
    throw err;
  }
}
