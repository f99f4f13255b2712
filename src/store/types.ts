/** The plain data the Store deals in: git modes, tree entries, commits. */

export const MODE = { tree: 0o040000, file: 0o100644, exec: 0o100755, link: 0o120000 } as const;

/** A gitlink: a submodule's commit named in a tree (the commit itself lives in another repository). */
export const GITLINK = 0o160000;

/** The id of git's empty tree (git and libgit2 know it without storing it). */
export const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

export interface Entry {
  oid: string;
  mode: number;
}
export type Tree = ReadonlyMap<string, Entry>;

export interface CommitInfo {
  oid: string;
  tree: string;
  parents: string[];
  /** Committer time, seconds since the epoch. */
  time: number;
  message: string;
}

export interface Identity {
  name: string;
  email: string;
}

export interface NewCommit {
  tree: string;
  parents: string[];
  message: string;
  author: Identity;
  committer?: Identity;
}

/** One path that differs between two trees (files and symlinks; directories are walked, not listed). */
export interface Change {
  path: string;
  status: 'added' | 'modified' | 'deleted';
  before?: Entry;
  after?: Entry;
}

/** A folder whose own record changed, or that is new: as a PR lists it, `A dir/` or `M dir/`. */
export interface FolderChange {
  path: string;
  status: 'added' | 'modified';
}

/** A path a three-way merge could not resolve: the entry on each side (absent where it was deleted or never existed). */
export interface MergeConflict {
  path: string;
  base?: Entry;
  ours?: Entry;
  theirs?: Entry;
}

/** The object store's size, as `git count-objects -v` reports it (bytes). */
export interface ObjectCounts {
  loose: number;
  looseBytes: number;
  packed: number;
  packBytes: number;
}
