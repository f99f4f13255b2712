import type { UpdateConflict } from '../merge/update.js';

/** What `nas branch update` and `nas branch resolve` answer. */

export interface BranchUpdated {
  view: string;
  /** The branch's head now (the merge commit, or as it was when up to date) and main's head that was merged. */
  head: string;
  main: string;
  /** The branch held everything on main already: nothing was done. */
  upToDate: boolean;
  /** Paths both sides changed, and what each holds now (`markers`: edit it before proposing). */
  conflicts: UpdateConflict[];
}

export interface BranchResolved {
  view: string;
  path: string;
  took: 'main' | 'branch';
  /** The branch's head now (a new commit when main's side was taken). */
  head: string;
  /** Whether the side that lost went to the recycle area (false: it held nothing else). */
  recycled: boolean;
  /** What is still unresolved in the branch (it can be proposed once this is empty). */
  unresolved: string[];
}
