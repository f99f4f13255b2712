import { MODE, type Change, type Entry, type FolderChange, type Store } from '../store/store.js';
import { fullMode, type FileMeta } from '../store/file-meta.js';
import { idNames } from '../util/accounts.js';
import { metaText } from '../util/display.js';
import { mapLimit } from '../util/concurrency.js';
import type { Owner } from '../util/owner.js';

/**
 * A change between two trees as a person (or a run) is shown it, by `nas diff`, `nas pr show` and the web page:
 * git's patch, with the full modes the metadata records hold (a setuid bit shows, 104755, where git says
 * 100755), a change of mode, owner, group or times (git sees none) as lines of their own (`owner root -> alice`),
 * the folders added or changed, and, for a file the reader could not read through the mount, its modes but not
 * its content.
 */

/** One piece of what git does not keep that changed: modes in octal, owners and groups by name, times in ISO 8601 (UTC). */
export interface MetaChange {
  field: 'mode' | 'owner' | 'group' | 'mtime' | 'atime';
  /** Absent: the side has no metadata record to say it. */
  before?: string;
  after?: string;
}

export interface ShownFile extends Change {
  beforeMode?: number;
  afterMode?: number;
  /** For a file on both sides: its metadata that changed (times only when its content did not: they move with it). */
  meta?: MetaChange[];
  /** The reader may not read it (before or after): the patch names it but shows none of its content. */
  withheld?: boolean;
}

export interface ShownFolder extends FolderChange {
  meta?: MetaChange[];
}

export interface ShownDiff {
  files: ShownFile[];
  folders: ShownFolder[];
  patch: string;
  /** Paths whose content was withheld. */
  withheld: string[];
  /** The blob versions whose content the patch carries: what the reader has now read. */
  shown: { path: string; oid: string }[];
}

export const octal = (mode: number): string => mode.toString(8).padStart(6, '0');

/**
 * `mayRead(tree, path)`: whether the reader could read it through the mount; absent, everything shows. `owner`:
 * who the views show as owning a path without a metadata record (root by default).
 */
export async function shownDiff(
  store: Store, before: string, after: string, opts: { under?: string; mayRead?: (tree: string, path: string) => Promise<boolean>; owner?: Owner } = {},
): Promise<ShownDiff> {
  const { under, mayRead } = opts;
  const inside = (path: string) => !under || path === under || path.startsWith(`${under}/`);
  const describe = describer(await idNames(), opts.owner ?? { uid: 0, gid: 0 });
  const changes = (await store.fileChanges(before, after)).filter((c) => inside(c.path));
  const files = await mapLimit(changes.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0)), 8, async (c): Promise<ShownFile> => {
    const side = async (tree: string, e?: Entry) => {
      if (!e) return undefined;
      const meta = await store.meta(tree, c.path, e.mode);
      return { mode: fullMode(e.mode, meta), meta };
    };
    const [was, now] = await Promise.all([side(before, c.before), side(after, c.after)]);
    const meta = was && now ? describe(was, now, c.before!.oid === c.after!.oid) : [];
    const readable = !mayRead || ((!c.before || (await mayRead(before, c.path))) && (!c.after || (await mayRead(after, c.path))));
    return {
      ...c, ...(was ? { beforeMode: was.mode } : {}), ...(now ? { afterMode: now.mode } : {}), ...(meta.length ? { meta } : {}), ...(readable ? {} : { withheld: true }),
    };
  });
  const folders = await mapLimit((await store.folderChanges(before, after)).filter((f) => inside(f.path)), 8, async (f): Promise<ShownFolder> => {
    if (f.status === 'added') return f;
    const [was, now] = await Promise.all([before, after].map(async (tree) => {
      const meta = await store.meta(tree, f.path, MODE.tree);
      return { mode: fullMode(MODE.tree, meta), meta };
    }));
    const meta = describe(was, now, true);
    return meta.length ? { ...f, meta } : f;
  });
  const pieces = await store.diffByFile(before, after);
  const out: string[] = [];
  const shown: ShownDiff['shown'] = [];
  for (const f of files) {
    const piece = pieces.get(f.path);
    const header = piece?.slice(0, piece.indexOf('\n')) ?? `diff --git a/${f.path} b/${f.path}`;
    const said = [...modeLines(f.beforeMode, f.afterMode), ...metaLines(f.meta)];
    if (f.withheld) {
      out.push([header, ...said, `content withheld: you could not read ${f.path} through the mount, so it is not shown here`, ''].join('\n'));
    } else if (piece) {
      out.push(withFullModes(piece, said, f.beforeMode !== undefined && f.beforeMode === f.afterMode ? f.beforeMode : undefined));
      for (const e of [f.before, f.after]) if (e && e.mode !== MODE.link) shown.push({ path: f.path, oid: e.oid });
    } else {
      // Listed, so something of it changed: every file counted has its piece.
      out.push([header, ...(said.length ? said : ['metadata record changed (unreadable)']), ''].join('\n'));
    }
  }
  return { files, folders, patch: out.join(''), withheld: files.filter((f) => f.withheld).map((f) => f.path), shown };
}

type Side = { mode: number; meta: FileMeta | null };

/** What changed between two sides' metadata, in the words a person reads; times only when asked. */
function describer(names: { user(uid: number): string; group(gid: number): string }, owner: Owner) {
  return (was: Side, now: Side, times: boolean): MetaChange[] => {
    const out: MetaChange[] = [];
    const add = (field: MetaChange['field'], before: string | undefined, after: string | undefined) => {
      if (before !== after) out.push({ field, ...(before !== undefined ? { before } : {}), ...(after !== undefined ? { after } : {}) });
    };
    add('mode', octal(was.mode), octal(now.mode));
    // Without a record, a path shows the Home's owner.
    add('owner', names.user(was.meta?.uid ?? owner.uid), names.user(now.meta?.uid ?? owner.uid));
    add('group', names.group(was.meta?.gid ?? owner.gid), names.group(now.meta?.gid ?? owner.gid));
    if (times) {
      add('mtime', was.meta ? isoTime(was.meta.mtimeNs) : undefined, now.meta ? isoTime(now.meta.mtimeNs) : undefined);
      add('atime', was.meta ? isoTime(was.meta.atimeNs) : undefined, now.meta ? isoTime(now.meta.atimeNs) : undefined);
    }
    return out;
  };
}

/** A time in nanoseconds as ISO 8601 in UTC, with as many decimals as it has: `2020-01-02T03:04:05.5Z`. */
export function isoTime(ns: bigint): string {
  const second = 1_000_000_000n;
  const frac = ((ns % second) + second) % second;
  const whole = new Date(Number((ns - frac) / second) * 1000).toISOString().slice(0, 19);
  const digits = frac.toString().padStart(9, '0').replace(/0+$/, '');
  return `${whole}${digits ? `.${digits}` : ''}Z`;
}

/** The patch's lines for metadata git does not say: modes are git's own lines (modeLines), the rest ours. */
function metaLines(meta: MetaChange[] | undefined): string[] {
  return (meta ?? []).filter((m) => m.field !== 'mode').map(metaText);
}

function modeLines(before?: number, after?: number): string[] {
  if (before === undefined) return after === undefined ? [] : [`new file mode ${octal(after)}`];
  if (after === undefined) return [`deleted file mode ${octal(before)}`];
  return before !== after ? [`old mode ${octal(before)}`, `new mode ${octal(after)}`] : [];
}

/**
 * git's piece for one file, its header lines saying what we know (the full modes, the metadata changes) and its
 * index line the full mode where that did not change.
 */
function withFullModes(piece: string, said: string[], same?: number): string {
  const lines = piece.split('\n');
  let end = 1;
  while (end < lines.length && /^(old mode|new mode|new file mode|deleted file mode|index) /.test(lines[end])) end++;
  const index = lines.slice(1, end).find((l) => l.startsWith('index '))?.replace(/ [0-7]{6}$/, '');
  return [lines[0], ...said, ...(index ? [same !== undefined ? `${index} ${octal(same)}` : index] : []), ...lines.slice(end)].join('\n');
}
