import NodeGit from 'nodegit';
import { MODE, type Entry, type Tree } from './types.js';
import { oneWriter } from './one-writer.js';

/**
 * Planning and applying a batch of tree edits (paths mapped to a new entry, or null to delete). libgit2
 * applies simple batches in C; the rest are applied here, one directory level at a time.
 */

export type Edits = ReadonlyMap<string, Entry | null>;

/** What applying edits needs from the object store. */
export interface TreeIO {
  readTree(oid: string): Promise<Tree>;
  writeTree(entries: Tree): Promise<string>;
}

/**
 * Whether libgit2's tree update can apply these changes as meant: it cannot delete a directory and add
 * into it in one pass, replace a file by a directory or back, or delete what is not there.
 * `lookup` finds a path in the tree being edited (null: absent, or no tree yet).
 */
export async function isSimpleEdit(lookup: (path: string) => Promise<Entry | null>, changes: Edits): Promise<boolean> {
  for (const [path, entry] of changes) {
    if (entry?.mode === MODE.tree) return false;
    const existing = await lookup(path);
    if (entry === null ? existing?.mode !== MODE.file && existing?.mode !== MODE.exec && existing?.mode !== MODE.link : existing?.mode === MODE.tree) return false;
    for (let i = path.indexOf('/'); entry && i > 0; i = path.indexOf('/', i + 1)) {
      const dir = await lookup(path.slice(0, i));
      if (!dir) break;
      if (dir.mode !== MODE.tree || changes.has(path.slice(0, i))) return false;
    }
  }
  return true;
}

/**
 * Apply a batch isSimpleEdit accepts to tree `root` by libgit2's tree update: in C, rewriting each touched
 * directory once, with no per-entry JavaScript. Returns the new tree.
 */
export async function applySimpleEdits(repo: any, root: string, changes: Edits): Promise<string> {
  const base = await NodeGit.Tree.lookup(repo, NodeGit.Oid.fromString(root));
  const updates = [...changes].map(([path, entry]) => {
    const u = new NodeGit.TreeUpdate();
    u.action = entry ? NodeGit.Tree.UPDATE.UPSERT : NodeGit.Tree.UPDATE.REMOVE;
    u.path = path;
    u.filemode = entry?.mode ?? 0;
    if (entry) u.id = NodeGit.Oid.fromString(entry.oid);
    return u;
  });
  return (await oneWriter(() => base.createUpdated(repo, updates.length, updates))).tostrS();
}

/** The edits as a trie of directory levels, applied in order. */
export function editTrie(changes: Edits): EditNode {
  const trie = new EditNode();
  for (const [path, entry] of changes) trie.add(path.split('/'), entry);
  return trie;
}

/** Apply one level of edits to a tree (null: empty); returns the new tree, or null when it ends up empty. */
export async function applyEdits(io: TreeIO, treeOid: string | null, node: EditNode): Promise<string | null> {
  const entries = new Map(treeOid ? await io.readTree(treeOid) : []);
  // Deletions first, so that "delete dir, then add dir/file" leaves only the new file.
  for (const [name, child] of node.children) {
    if (child.replace !== undefined) {
      if (child.replace === null) entries.delete(name);
      else if (child.replace.mode !== MODE.tree || child.children.size === 0) entries.set(name, child.replace);
    }
  }
  for (const [name, child] of node.children) {
    if (child.children.size === 0) continue;
    const existing = entries.get(name);
    const base = existing && existing.mode === MODE.tree ? existing.oid : null;
    const sub = await applyEdits(io, base, child);
    if (sub === null) entries.delete(name);
    else entries.set(name, { oid: sub, mode: MODE.tree });
  }
  if (entries.size === 0) return null;
  return io.writeTree(entries);
}

/** One directory level of a batch of tree edits. */
export class EditNode {
  /** Set when this path itself is replaced (entry) or deleted (null). */
  replace: Entry | null | undefined = undefined;
  readonly children = new Map<string, EditNode>();

  add(parts: string[], entry: Entry | null): void {
    let node: EditNode = this;
    for (const part of parts) {
      let next = node.children.get(part);
      if (!next) node.children.set(part, (next = new EditNode()));
      node = next;
    }
    // Changes apply in order: a deletion or a file replaces whatever was below; a later change below a
    // deleted directory adds to the empty place.
    node.replace = entry;
    if (entry === null || entry.mode !== MODE.tree) node.children.clear();
  }
}
