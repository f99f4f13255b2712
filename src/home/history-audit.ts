import { GITLINK, MODE, type Store } from '../store/store.js';
import { META_ROOT } from '../store/file-meta.js';
import { gitRefusesName } from '../policy/policy.js';

/** Something a Home must not take from a repository elsewhere, and where its history holds it. */
export interface Unservable {
  commit: string;
  path: string;
  /** What it is, and why a Home cannot hold it. */
  why: string;
}

/**
 * The first thing in any commit reachable from `head` (every commit, not only the tip: history views serve
 * old commits too) that a Home must not hold, or null: a name git treats as `.git` in any spelling (root's git
 * would take it for a repository's and run what its config says), a gitlink (a submodule's commit, which is
 * not in the Store), or `.nas-meta` at the root (where the Store keeps its metadata records). Each tree is read
 * once, however many commits share it.
 */
export async function findUnservable(store: Store, head: string): Promise<Unservable | null> {
  const commits = [head];
  const seenCommits = new Set(commits);
  const seenTrees = new Set<string>();
  for (let i = 0; i < commits.length; i++) {
    const commit = await store.readCommit(commits[i]);
    for (const p of commit.parents) if (!seenCommits.has(p)) seenCommits.add(p), commits.push(p);
    if ((await store.readTree(commit.tree)).has(META_ROOT)) {
      return { commit: commit.oid, path: META_ROOT, why: `is where a Home keeps its files' metadata records: a repository's own would be taken for them` };
    }
    const found = await findInTree(store, commit.tree, seenTrees);
    if (found) return { commit: commit.oid, ...found };
  }
  return null;
}

/** Depth first through the trees below `root` not seen before. */
async function findInTree(store: Store, root: string, seen: Set<string>): Promise<Omit<Unservable, 'commit'> | null> {
  const stack = [{ oid: root, path: '' }];
  while (stack.length > 0) {
    const { oid, path } = stack.pop()!;
    if (seen.has(oid)) continue;
    seen.add(oid);
    for (const [name, entry] of await store.readTree(oid)) {
      const at = path ? `${path}/${name}` : name;
      if (gitRefusesName(name)) return { path: at, why: 'is a name git takes for its own .git directory: root\'s git run in the Home would read it as a repository\'s' };
      if (entry.mode === GITLINK) return { path: at, why: 'is a submodule (a gitlink to a commit of another repository): a Home holds files, not submodules' };
      if (entry.mode === MODE.tree) stack.push({ oid: entry.oid, path: at });
    }
  }
  return null;
}
