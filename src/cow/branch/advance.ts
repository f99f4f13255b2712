import fs from 'node:fs/promises';
import { fsError } from '../../util/errors.js';
import { RefConflict, type Store } from '../../store/store.js';
import { branchRef } from '../../store/refs.js';
import { GitLayer } from '../git-layer.js';
import type { Overlay } from './overlay.js';
import type { BranchState } from './state.js';

/** What moving a branch view to a new commit touches: its ref, its layers, its pending changes and its space. */
export interface AdvanceParts {
  store: Store;
  branch: string;
  /** For messages. */
  name: string;
  overlay: Overlay;
  state: BranchState;
  /** Commit everything pending (open files included) and wait for it. */
  sync(): Promise<void>;
}

/** Writes a commit whose first parent is `head` (not on any ref yet), or answers null: nothing to do. */
export type MakeCommit = (head: string) => Promise<string | null>;

const ATTEMPTS = 20;

/**
 * Move a branch view to a commit nasd makes from its head (main merged into it, `nas branch update`): what is
 * pending is committed first, the commit is made from the head then, and it goes onto the branch's ref by
 * compare-and-swap (made again from the new head when a write's commit got there first). The view shows it at
 * once: the upper directory's copy of each file the commit changed goes (git holds that copy's content and record
 * in the old head), so the new version shows through; a file written again since is left, and its write is
 * committed on top. Refused while a file the commit changes is open for writing, and once the branch expired.
 * Returns the commit now at the head, or null when `make` found nothing to do.
 */
export async function advance(p: AdvanceParts, make: MakeCommit): Promise<string | null> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    p.state.refuseIfExpired();
    await p.sync();
    const head = p.overlay.layer.commit;
    const made = await make(head.oid);
    if (!made) return null;
    const next = await p.store.readCommit(made);
    const changed = (await p.store.fileChanges(head.tree, next.tree)).map((c) => c.path);
    const open = changed.filter((path) => isOpen(p, path));
    if (open.length > 0) throw fsError('EBUSY', `${open.join(', ')} ${open.length > 1 ? 'are' : 'is'} open for writing in ${p.name}; close, then retry`);
    if (p.overlay.layer.commit.oid !== head.oid) continue;
    for (const path of changed) await dropCopy(p, path);
    try {
      await p.store.updateRef(branchRef(p.branch), made, head.oid, next.message.split('\n')[0]);
    } catch (err) {
      if (err instanceof RefConflict) continue;
      throw err;
    }
    p.overlay.setHead(new GitLayer(p.store, next, p.overlay.layer.time));
    return made;
  }
  throw new Error(`${p.name} kept moving: ${ATTEMPTS} attempts lost the race to its writes; try again`);
}

const isOpen = (p: AdvanceParts, path: string) => p.state.isOpenForWriting(path);

/** The upper copy of a committed file, unless it is scratch or was changed (written, deleted) since the sync. */
async function dropCopy(p: AdvanceParts, path: string): Promise<void> {
  if (p.state.isDirty(path) || p.state.isWhiteout(path) || (await p.overlay.scratchAt(path))) return;
  const st = await p.overlay.statNs(path);
  if (!st || st.isDirectory() || p.state.isDirty(path) || isOpen(p, path)) return;
  await p.overlay.tree.at(path, (file) => fs.unlink(file));
  p.state.usage.removed(path);
}
