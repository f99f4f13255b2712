import type { Store } from '../store/store.js';
import { idsByPath } from './check.js';
import { treeFiles, type FileSet } from './files.js';
import { loadMemory, type Memory } from './model.js';

/**
 * A branch's memory, read against main: a note counts as reviewed only with content main has (now, or where
 * the branch forked from it), so a claim of review the branch made itself does not count.
 */
export async function branchMemory(store: Store, files: FileSet, commit: string, mainHead: string): Promise<Memory> {
  const ids = async (c: string) => idsByPath(await treeFiles(store, (await store.readCommit(c)).tree).list());
  const now = await ids(mainHead);
  const fork = await store.mergeBase(commit, mainHead);
  const then = fork ? await ids(fork) : new Map<string, string>();
  return loadMemory(files, (path, id) => now.get(path) === id || then.get(path) === id);
}
