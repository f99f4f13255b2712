import { MAIN_REF } from '../store/refs.js';
import { MODE, RefConflict, type Change, type Entry, type Identity, type MergeConflict, type Store } from '../store/store.js';
import { META_ROOT, metaPath, recordFits, recordSubject } from '../store/file-meta.js';
import { itemsFromGit, type Trash } from '../trash/trash.js';
import { decodeText } from '../util/text.js';
import { conflictHunks } from './hunks.js';
import { driverFor, holds, mergeStructured } from './structured.js';
import { parseMerge, type MergeConfig } from '../config/home-config.js';
import type { Conflict } from './pr-store.js';

/**
 * The one way a change lands on main, for an Agent PR (propose.ts) and the owner's memory review
 * (workflows/memory.ts) alike: libgit2's three-way merge (text line by line, anything else whole), a merge
 * commit with both parents, and main moved only by compare-and-swap, retried against the new main when
 * another merge got there first. Any conflict stops it with main untouched. Files the merge deletes from main
 * go to the recycle area.
 */

export type MergeOutcome =
  | { kind: 'merged'; commit: string; deleted: string[] }
  | { kind: 'conflict'; conflicts: Conflict[] }
  | { kind: 'up-to-date' };

const ATTEMPTS = 20;

export async function mergeIntoMain(
  store: Store,
  trash: Trash,
  opts: {
    head: string; message: string; author: Identity; run?: string;
    /**
     * The main the change was checked against: it lands on that main or not at all (the RefConflict is thrown,
     * no retry), as a retry would merge into a main that nothing checked it with.
     */
    onto?: string;
    /** False when what the change deletes lives on in it (a reviewed note moved out of quarantine): nothing is lost. */
    recycle?: boolean;
  },
): Promise<MergeOutcome> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const main = opts.onto ?? (await store.readRef(MAIN_REF));
    if (!main) throw new Error('main has no ref');
    const base = await store.mergeBase(opts.head, main);
    if (base === opts.head) return { kind: 'up-to-date' };
    const [baseTree, mainTree, headTree] = await Promise.all(
      [base, main, opts.head].map(async (c) => (c ? (await store.readCommit(c)).tree : null)),
    );
    const merged = baseTree === mainTree ? { tree: headTree! } : await mergeContent(store, baseTree, mainTree!, headTree!);
    if ('conflicts' in merged) return { kind: 'conflict', conflicts: [...merged.structured, ...(await describe(store, merged.conflicts))] };
    const deleted = (await store.fileChanges(mainTree, merged.tree)).filter((c) => c.status === 'deleted');
    let commit: string;
    try {
      commit = await store.commitTree(MAIN_REF, { head: main, tree: merged.tree, otherParents: [opts.head], message: opts.message, author: opts.author });
    } catch (err) {
      if (err instanceof RefConflict && !opts.onto) continue;
      throw err;
    }
    if (opts.recycle !== false) await trash.add(await itemsFromGit(store, deleted.map((c) => ({ path: c.path, entry: c.before! })), 'main', opts.run, mainTree!));
    return { kind: 'merged', commit, deleted: deleted.map((c) => c.path) };
  }
  throw new Error(`main kept moving: ${ATTEMPTS} merge attempts lost the race; try again`);
}

/**
 * The three-way merge of the files, then of their metadata records (file-meta.ts; directories' and symlinks'
 * too) path by path: the branch's record wins where the branch changed it, main's stays elsewhere, so records
 * never conflict on their own.
 */
export async function mergeContent(
  store: Store, baseTree: string | null, mainTree: string, headTree: string,
): Promise<{ tree: string } | { conflicts: MergeConflict[]; structured: Conflict[] }> {
  const empty = await store.writeTree(new Map());
  const [base, main, head] = await Promise.all([baseTree ?? empty, mainTree, headTree].map((t) => store.withoutMeta(t)));
  const resolved = await mergeByDriver(store, base, main, head, await mergeConfig(store, mainTree));
  if (resolved.conflicts.length > 0) return { conflicts: [], structured: resolved.conflicts };
  let files = await store.mergeTrees(base, main, head);
  // Where git's line merge of a driver's file conflicts, both sides take the driver's result, so git takes it.
  const conflicted = new Set('conflicts' in files ? files.conflicts.map((c) => c.path) : []);
  const byDriver = new Map<string, Entry>();
  for (const [path, r] of resolved.merged) if (conflicted.has(path)) byDriver.set(path, await r.entry());
  if (byDriver.size > 0) {
    const [mainSide, headSide] = await Promise.all([main, head].map((t) => store.editTree(t, byDriver)));
    files = await store.mergeTrees(base, mainSide, headSide);
  }
  if (!('conflicts' in files)) {
    // Where git merged the lines cleanly, its bytes stay if they hold the same data (numbers, comments and order
    // as written); the driver's result replaces them where the line merge changed the data or broke the document.
    const edits = new Map<string, Entry>();
    for (const [path, r] of resolved.merged) {
      if (byDriver.has(path)) continue;
      const byLines = await store.lookupPath(files.tree, path);
      if (!byLines || !holds(r.driver, (await store.readBlob(byLines.oid)).toString(), r.value)) edits.set(path, await r.entry());
    }
    if (edits.size > 0) files = { tree: await store.editTree(files.tree, edits) };
  }
  if ('conflicts' in files) return { ...files, structured: [] };
  const mainRecords = await store.recordsOf(mainTree);
  const withMain = mainRecords ? await store.editTree(files.tree, new Map([[META_ROOT, { oid: mainRecords, mode: MODE.tree }]])) : files.tree;
  // Records go path by path: the branch's where it changed one and it still describes what the merge keeps at
  // its path (a file, directory or symlink as recorded); main's own otherwise, unless main still has the base's
  // record, which the branch removed or which went stale with the branch's change. Removals go in first: a
  // removal of `.nas-meta/x` after the records of a new directory x would take them with it.
  const removals = new Map<string, null>();
  const kept = new Map<string, Entry>();
  for (const c of await store.changes(await store.recordsOf(baseTree), await store.recordsOf(headTree))) {
    const at = metaPath(c.path);
    const subject = await store.lookupPath(files.tree, recordSubject(c.path).path);
    const meta = c.after && subject ? await store.readMeta(c.after.oid) : null;
    if (meta && recordFits(meta, subject!.mode)) kept.set(at, c.after!);
    else if (c.before && (await store.lookupPath(withMain, at))?.oid === c.before.oid) removals.set(at, null);
  }
  const edits = new Map<string, Entry | null>([...removals, ...kept]);
  return { tree: edits.size > 0 ? await store.editTree(withMain, edits) : withMain };
}

/** Main's `.nas/merge.yaml` (the built-in drivers when it has none, or one that does not read). */
async function mergeConfig(store: Store, mainTree: string): Promise<MergeConfig> {
  const entry = await store.lookupPath(mainTree, '.nas/merge.yaml');
  return parseMerge(entry ? (await store.readBlob(entry.oid)).toString() : '').value;
}

/** A file a JSON or YAML driver merged: its data, and its blob when it is wanted. */
interface DriverMerge {
  entry: () => Promise<Entry>;
  value: unknown;
  driver: 'json' | 'yaml';
}

/**
 * Files both sides changed that a JSON or YAML driver is registered for: merged key by key. Returns each merged
 * file (blob and data) and, for files where both changed one key differently, a conflict naming the keys.
 */
async function mergeByDriver(
  store: Store, base: string, main: string, head: string, config: MergeConfig,
): Promise<{ merged: Map<string, DriverMerge>; conflicts: Conflict[] }> {
  const merged = new Map<string, DriverMerge>();
  const conflicts: Conflict[] = [];
  for (const path of await changedOnBothSides(store, base, main, head)) {
    const driver = driverFor(path, config);
    if (driver !== 'json' && driver !== 'yaml') continue;
    const [b, m, h] = await Promise.all([base, main, head].map((t) => store.lookupPath(t, path)));
    if (!m || !h || m.mode === MODE.tree || h.mode === MODE.tree || m.mode === MODE.link || h.mode === MODE.link) continue;
    const text = async (e: Entry | null) => (e ? (await store.readBlob(e.oid)).toString() : null);
    const result = mergeStructured(driver, await text(b), (await text(m))!, (await text(h))!);
    if ('conflict' in result) conflicts.push({ path, kind: 'structured', keys: result.conflict });
    // The blob is written only if the driver's text is used (git's bytes are kept where they hold the same data).
    else merged.set(path, { entry: async () => ({ oid: await store.writeBlob(result.text), mode: m.mode }), value: result.value, driver });
  }
  return { merged, conflicts };
}

/** Paths changed differently on main and on the branch since their common ancestor (files, records aside). */
export async function changedOnBothSides(store: Store, base: string | null, main: string, head: string, branchChanges?: Change[]): Promise<string[]> {
  const [onMain, onBranch] = await Promise.all([store.fileChanges(base, main), branchChanges ?? store.fileChanges(base, head)]);
  const branchSide = new Map(onBranch.map((c) => [c.path, c.after?.oid]));
  return onMain.filter((c) => branchSide.has(c.path) && branchSide.get(c.path) !== c.after?.oid).map((c) => c.path);
}

/** Each conflict with its kind, and for text the hunks where both sides changed the same lines. */
async function describe(store: Store, conflicts: MergeConflict[]): Promise<Conflict[]> {
  return Promise.all(conflicts.map(async (c): Promise<Conflict> => {
    if (!c.ours || !c.theirs) return { path: c.path, kind: 'delete' };
    const [base, ours, theirs] = await Promise.all([c.base, c.ours, c.theirs].map(async (e) => (e ? decodeText(await store.readBlob(e.oid)) : '')));
    if (base === null || ours === null || theirs === null) return { path: c.path, kind: 'binary' };
    const hunks = conflictHunks(base, ours, theirs)?.map((h) => ({ line: h.line, base: h.base, main: h.ours, branch: h.theirs }));
    return { path: c.path, kind: 'text', ...(hunks ? { hunks } : {}) };
  }));
}
