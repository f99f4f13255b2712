import { MODE, type Change, type Entry, type Identity, type Store } from '../store/store.js';
import { classify, type Rules } from '../policy/policy.js';
import { UserError } from '../util/errors.js';
import { decodeText } from '../util/text.js';
import { mergeWithMarkers } from './hunks.js';
import { mergeContent } from './merge.js';
import { fullMode, metaPath, recordSubject, type FileMeta } from '../store/file-meta.js';

/**
 * Main merged into a branch (`nas branch update`): the three-way merge that lands a PR on main (merge.ts: lines,
 * the JSON and YAML drivers, metadata records path by path), except that a conflict does not stop it. A text file
 * both sides changed in the same lines holds both versions between git-style markers, the branch's first; an
 * append-only file (the journal) holds main's version and then what the branch appended; anything else that
 * conflicts (not text, a symlink, changed on one side and deleted on the other) keeps the version that changed,
 * the branch's where both did, for now: it is `unresolved`, a side a person picks (`nas branch resolve`). A read-only path (.nas/) cannot be edited in a branch, so a conflict there refuses
 * the update. Main's side of a conflict goes into the branch only if the caller could read it through main's view
 * (else the branch's side stays, listed), and a file that holds both sides takes the stricter of their two
 * metadata records: an update never shows main's content under the branch's looser mode or owner. This writes the
 * merge commit (parents: the branch's head, main's head) and moves no ref.
 */

export interface UpdateConflict {
  path: string;
  /**
   * `markers`: both versions in the file, to be edited before the branch can be proposed; `appended`: main's
   * version, then the branch's additions; `kept-branch`, `kept-main`: that side's version stands (`why`).
   */
  resolution: 'markers' | 'appended' | 'kept-branch' | 'kept-main';
  why?: string;
  /** A person picks the side that stays (`nas branch resolve`); until then the branch cannot be proposed. */
  unresolved?: true;
}

export type BranchUpdate = { kind: 'up-to-date' } | { kind: 'merged'; commit: string; conflicts: UpdateConflict[] };

/** The marker lines that open and close a conflict left in a branch by an update. */
const opening = (branch: string) => `<<<<<<< ${branch}`;
const CLOSING = '>>>>>>> main';

/** Whether the caller could read a path of a tree through a view (undefined: it reads everything). */
export type MayRead = (tree: string, path: string) => Promise<boolean>;

interface UpdateOptions {
  head: string;
  main: string;
  branch: string;
  rules: Rules;
  author: Identity;
  /** Who asks, as main's view would judge them. */
  mayReadMain?: MayRead;
}

export async function mergeMainInto(store: Store, o: UpdateOptions): Promise<BranchUpdate> {
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
      for (const c of await modeConflicts(store, { base: baseTree, main: mainTree, head: headTree }, merged.tree)) if (!conflicts.has(c.path)) conflicts.set(c.path, c);
      const list = [...conflicts.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
      const both = list.filter((c) => c.resolution === 'markers' || c.resolution === 'appended').map((c) => c.path);
      const tree = both.length > 0 ? await withStricterRecords(store, merged.tree, { main: mainTree, head: headTree }, both) : merged.tree;
      const message = `Merge main into ${o.branch}\n\n${list.map((c) => `${c.resolution} ${quoted(c.path)}\n`).join('')}${list.length ? '\n' : ''}` +
        `Nas-Branch: ${o.branch}\nNas-Main: ${o.main}\n`;
      const commit = await store.writeCommit({ tree, parents: [o.head, o.main], message, author: o.author });
      return { kind: 'merged', commit, conflicts: list };
    }
    const paths = [...merged.structured.map((c) => c.path), ...merged.conflicts.map((c) => c.path)].filter((p) => !conflicts.has(p));
    if (paths.length === 0) break;
    const edits = new Map<string, Entry | null>();
    for (const path of paths) {
      const { entry, conflict } = await settle(store, o, { ...sides, mainAsIs: mainTree }, path);
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

/**
 * What one conflicting path holds after the update, on both sides alike (so the next pass merges it cleanly); null:
 * nothing (the branch deleted it). `mainAsIs`: main's tree as it is, what the caller's right to read is judged on.
 */
async function settle(
  store: Store, o: { branch: string; rules: Rules; mayReadMain?: MayRead }, trees: { base: string; main: string; head: string; mainAsIs: string }, path: string,
): Promise<{ entry: Entry | null; conflict: UpdateConflict }> {
  const [b, m, h] = await Promise.all([trees.base, trees.main, trees.head].map((t) => store.lookupPath(t, path)));
  const rules = classify(o.rules, path);
  if (rules.readOnly) throw refusal(o.branch, path, 'it is read-only in a branch, where the conflict could not be resolved (propose the branch, or change it with nas home config)');
  if (m && m.mode !== MODE.tree && o.mayReadMain && !(await o.mayReadMain(trees.mainAsIs, path))) {
    if (h?.mode === MODE.tree) throw refusal(o.branch, path, 'it is a folder on one side');
    const why = "main's version is not yours to read through main's view, so it was not written into the branch (its owner can update the branch)";
    return { entry: h, conflict: { path, resolution: 'kept-branch', why, unresolved: true } };
  }
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
  return { entry: kept, conflict: { path, resolution: h ? 'kept-branch' : 'kept-main', why, unresolved: true } };
}

/**
 * Files whose mode or owner both sides changed, each its own way (their metadata records: file-meta.ts). The merge
 * keeps the branch's record, as records never conflict by themselves; here that is a side a person picks. Times
 * alone differ on every file both wrote, and are not a conflict.
 */
async function modeConflicts(store: Store, trees: { base: string; main: string; head: string }, merged: string): Promise<UpdateConflict[]> {
  const [base, main, head] = await Promise.all([trees.base, trees.main, trees.head].map((t) => store.recordsOf(t)));
  const access = async (oid?: string) => {
    const m: FileMeta | null = oid ? await store.readMeta(oid) : null;
    return m ? `${m.mode & 0o7777} ${m.uid} ${m.gid}` : '';
  };
  const onMain = new Map((await store.changes(base, main)).map((c) => [c.path, c]));
  const out: UpdateConflict[] = [];
  for (const c of await store.changes(base, head)) {
    const other = onMain.get(c.path);
    const subject = recordSubject(c.path);
    if (!other || subject.dir || !c.after || !other.after || !(await store.lookupPath(merged, subject.path))) continue;
    const [was, ours, theirs] = await Promise.all([access(c.before?.oid), access(c.after.oid), access(other.after.oid)]);
    if (ours !== was && theirs !== was && ours !== theirs) {
      out.push({ path: subject.path, resolution: 'kept-branch', why: 'both changed its mode or owner, each its own way', unresolved: true });
    }
  }
  return out;
}

/**
 * A file that holds main's content and the branch's takes the stricter of their records: the one that leaves the
 * group and others fewer rights, main's (its owner's) where both leave as many. No record on main's side means
 * the Home owner's defaults (file-meta.ts fullMode).
 */
async function withStricterRecords(store: Store, tree: string, sides: { main: string; head: string }, paths: string[]): Promise<string> {
  const edits = new Map<string, Entry | null>();
  const others = (mode: number) => [...(mode & 0o077).toString(2)].filter((b) => b === '1').length;
  for (const path of paths) {
    const at = await store.lookupPath(tree, path);
    if (!at) continue;
    const [main, head] = await Promise.all([sides.main, sides.head].map(async (t) => ({
      record: await store.lookupPath(t, metaPath(path)),
      mode: fullMode(at.mode, await store.meta(t, path, at.mode)),
    })));
    const stricter = others(head.mode) < others(main.mode) ? head : main;
    if ((await store.lookupPath(tree, metaPath(path)))?.oid !== stricter.record?.oid) edits.set(metaPath(path), stricter.record);
  }
  return edits.size > 0 ? store.editTree(tree, edits) : tree;
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

/**
 * A side picked for a file an update left unresolved: main's version (as the update's main commit had it, with
 * its record) or the branch's as it is now. Returns the commit that puts main's side in place (null when the
 * branch's stays, or already holds main's), and the version that lost, for the recycle area (null: none), with the
 * tree it is in (its record, mode and owner, goes with it: the recycle area shows it only to whom it showed before).
 */
export async function takeSide(
  store: Store, o: { head: string; main: string; path: string; take: 'main' | 'branch'; branch: string; author: Identity },
): Promise<{ commit: string | null; lost: Entry | null; lostIn: string }> {
  const [headTree, mainTree] = await Promise.all([o.head, o.main].map(async (c) => (await store.readCommit(c)).tree));
  const [ours, theirs] = await Promise.all([headTree, mainTree].map((t) => store.lookupPath(t, o.path)));
  const file = (e: Entry | null) => (e && e.mode !== MODE.tree ? e : null);
  const same = ours?.oid === theirs?.oid;
  if (o.take === 'branch') return { commit: null, lost: same ? null : file(theirs), lostIn: mainTree };
  if (ours?.mode === MODE.tree || theirs?.mode === MODE.tree) throw new UserError(`${o.path} is a folder on one side: pick main's files one by one`, 409);
  const [record, ourRecord] = await Promise.all([mainTree, headTree].map((t) => store.lookupPath(t, metaPath(o.path))));
  if (ours?.oid === theirs?.oid && ours?.mode === theirs?.mode && record?.oid === ourRecord?.oid) return { commit: null, lost: null, lostIn: headTree };
  const tree = await store.editTree(headTree, new Map([[o.path, theirs], [metaPath(o.path), theirs ? record : null]]));
  const message = `Resolve ${quoted(o.path)}: main's version taken\n\nNas-Branch: ${o.branch}\nNas-Main: ${o.main}\n`;
  return { commit: await store.writeCommit({ tree, parents: [o.head], message, author: o.author }), lost: same ? null : file(ours), lostIn: headTree };
}
