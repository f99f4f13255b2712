import { MODE, type Change, type Entry, type Identity, type Store } from '../store/store.js';
import { classify, type Rules } from '../policy/policy.js';
import { UserError } from '../util/errors.js';
import { decodeText } from '../util/text.js';
import { mergeWithMarkers } from './hunks.js';
import { mergeContent } from './merge.js';

/**
 * Main merged into a branch (`nas branch update`): the three-way merge that lands a PR on main (merge.ts: lines,
 * the JSON and YAML drivers, metadata records path by path), except that a conflict does not stop it. A text file
 * both sides changed in the same lines holds both versions between git-style markers, the branch's first; an
 * append-only file (the journal) holds main's version and then what the branch appended; anything else that
 * conflicts (not text, a symlink, changed on one side and deleted on the other) keeps the version that changed,
 * the branch's where both did. A read-only path (.nas/) cannot be edited in a branch, so a conflict there refuses
 * the update. This writes the merge commit (parents: the branch's head, main's head) and moves no ref.
 */

export interface UpdateConflict {
  path: string;
  /**
   * `markers`: both versions in the file, to be edited before the branch can be proposed; `appended`: main's
   * version, then the branch's additions; `kept-branch`, `kept-main`: that side's version stands (`why`).
   */
  resolution: 'markers' | 'appended' | 'kept-branch' | 'kept-main';
  why?: string;
}

export type BranchUpdate = { kind: 'up-to-date' } | { kind: 'merged'; commit: string; conflicts: UpdateConflict[] };

/** The marker lines that open and close a conflict left in a branch by an update. */
const opening = (branch: string) => `<<<<<<< ${branch}`;
const CLOSING = '>>>>>>> main';

export async function mergeMainInto(
  store: Store, o: { head: string; main: string; branch: string; rules: Rules; author: Identity },
): Promise<BranchUpdate> {
  const base = await store.mergeBase(o.head, o.main);
  if (!base) throw new UserError(`${o.branch} shares no history with main: main cannot be merged into it`, 409);
  if (base === o.main) return { kind: 'up-to-date' };
  const [baseTree, mainTree, headTree] = await Promise.all([base, o.main, o.head].map(async (c) => (await store.readCommit(c)).tree));
  const sides = { base: baseTree, main: mainTree, head: headTree };
  const conflicts = new Map<string, UpdateConflict>();
  // Each pass settles what the last one found (the drivers' conflicts come before git's line merge is asked).
  for (let pass = 0; pass < 4; pass++) {
    const merged = await mergeContent(store, baseTree, sides.main, sides.head);
    if ('tree' in merged) {
      const list = [...conflicts.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
      const message = `Merge main into ${o.branch}\n\n${list.map((c) => `${c.resolution} ${quoted(c.path)}\n`).join('')}${list.length ? '\n' : ''}` +
        `Nas-Branch: ${o.branch}\nNas-Main: ${o.main}\n`;
      const commit = await store.writeCommit({ tree: merged.tree, parents: [o.head, o.main], message, author: o.author });
      return { kind: 'merged', commit, conflicts: list };
    }
    const paths = [...merged.structured.map((c) => c.path), ...merged.conflicts.map((c) => c.path)].filter((p) => !conflicts.has(p));
    if (paths.length === 0) break;
    const edits = new Map<string, Entry>();
    for (const path of paths) {
      const { entry, conflict } = await settle(store, o, sides, path);
      edits.set(path, entry);
      conflicts.set(path, conflict);
    }
    sides.main = await store.editTree(sides.main, edits);
    sides.head = await store.editTree(sides.head, edits);
  }
  throw refusal(o.branch, [...conflicts.keys()].join(', '), 'they could not be settled');
}

const refusal = (branch: string, path: string, why: string) =>
  new UserError(`main cannot be merged into ${branch}: ${path} changed on both sides and ${why}; nothing was changed`, 409);

const quoted = (p: string) => (/[\x00-\x1f\x7f]/.test(p) ? JSON.stringify(p) : p);
const regular = (e: Entry | null) => e?.mode === MODE.file || e?.mode === MODE.exec;

/** What one conflicting path holds after the update, on both sides alike (so the next pass merges it cleanly). */
async function settle(
  store: Store, o: { branch: string; rules: Rules }, trees: { base: string; main: string; head: string }, path: string,
): Promise<{ entry: Entry; conflict: UpdateConflict }> {
  const [b, m, h] = await Promise.all([trees.base, trees.main, trees.head].map((t) => store.lookupPath(t, path)));
  const rules = classify(o.rules, path);
  if (rules.readOnly) throw refusal(o.branch, path, 'it is read-only in a branch, where the conflict could not be resolved (propose the branch, or change it with nas home config)');
  if (regular(m) && regular(h) && (!b || regular(b))) {
    const [base, main, branch] = await Promise.all([b, m, h].map(async (e) => (e ? decodeText(await store.readBlob(e.oid)) : '')));
    if (base !== null && main !== null && branch !== null) {
      let text: string;
      if (!rules.appendOnly) text = mergeWithMarkers(base, branch, main, { ours: o.branch, theirs: 'main' });
      else if (main.startsWith(base) && branch.startsWith(base)) text = main + branch.slice(base.length);
      else throw refusal(o.branch, path, 'it is append-only, and one side did not only append to it');
      const resolution = rules.appendOnly ? 'appended' : 'markers';
      return { entry: { oid: await store.writeBlob(text), mode: h!.mode }, conflict: { path, resolution } };
    }
  }
  const kept = h ?? m;
  if (!kept || m?.mode === MODE.tree || h?.mode === MODE.tree) throw refusal(o.branch, path, 'it is a folder on one side');
  const why = !h ? 'the branch deleted it, main changed it' : !m ? 'main deleted it, the branch changed it' : 'it is not text, so it cannot hold both versions';
  return { entry: kept, conflict: { path, resolution: h ? 'kept-branch' : 'kept-main', why } };
}

/** The files among a branch's changes that still hold the markers an update left (up to 8 MiB each are read). */
export async function markedFiles(store: Store, changes: Change[], branch: string): Promise<string[]> {
  const out: string[] = [];
  for (const c of changes) {
    if (!c.after || !regular(c.after) || (await store.blobSize(c.after.oid)) > 8 << 20) continue;
    const lines = (decodeText(await store.readBlob(c.after.oid)) ?? '').split('\n');
    const open = lines.indexOf(opening(branch));
    const middle = open < 0 ? -1 : lines.indexOf('=======', open + 1);
    if (middle >= 0 && lines.indexOf(CLOSING, middle + 1) >= 0) out.push(c.path);
  }
  return out;
}
