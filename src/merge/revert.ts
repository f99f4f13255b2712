import type { Identity, Store } from '../store/store.js';
import { UserError } from '../util/errors.js';
import { nasTrailers } from '../util/text.js';
import { mergeContent } from './merge.js';
import type { PullRequest } from './pr-store.js';

/**
 * The inverse of a merged PR on today's main, as git revert -m 1 makes it: the three-way merge whose base is the
 * PR's merge commit, whose one side is main now and whose other is main as it was before the merge (the merge
 * commit's first parent). What main changed since in other files stays; a file main changed since in a way the
 * inverse cannot be laid over is a conflict, and the revert is refused naming it. Returns a commit whose parent is
 * `mainHead` (no ref moves here: it is proposed like any other change).
 */
export async function revertCommit(store: Store, pr: PullRequest, mainHead: string, author: Identity): Promise<string> {
  if (pr.state !== 'merged' || !pr.merged) {
    throw new UserError(`PR ${pr.id} is ${pr.state}, not merged: only a merged PR changed main, so only a merged PR can be reverted`, 409);
  }
  const merge = await store.readCommit(pr.merged.commit);
  // A PR that found main up to date recorded main's head, not a merge of its own: there is nothing of it to undo.
  if (merge.parents.length < 2 || nasTrailers(merge.message)['Nas-PR'] !== String(pr.id)) {
    throw new UserError(`PR ${pr.id} merged nothing of its own (main already had its changes): there is nothing to revert`, 409);
  }
  const [mergeTree, beforeTree, mainTree] = await Promise.all([merge.oid, merge.parents[0], mainHead].map(async (c) => (await store.readCommit(c)).tree));
  const inverse = await mergeContent(store, mergeTree, mainTree, beforeTree);
  if ('conflicts' in inverse) {
    const paths = [...new Set([...inverse.structured, ...inverse.conflicts].map((c) => c.path))].sort();
    throw new UserError(`PR ${pr.id} cannot be reverted cleanly: main changed ${paths.length === 1 ? 'a file' : 'files'} it changed since it merged ` +
      `(${paths.join(', ')}); nothing was proposed. Change ${paths.length === 1 ? 'it' : 'them'} back in a branch by hand and propose that`, 409);
  }
  if (inverse.tree === mainTree) throw new UserError(`main holds none of PR ${pr.id}'s changes any more (reverted already?): there is nothing to revert`, 409);
  const message = `Revert PR ${pr.id}: ${pr.intent}\n\nThis undoes PR ${pr.id} (merged as ${pr.merged.commit}) on main as of ${mainHead}.\n\n` +
    `Nas-Reverts: ${pr.id}\nNas-Principal: ${author.name}\n`;
  return store.writeCommit({ tree: inverse.tree, parents: [mainHead], message, author });
}
