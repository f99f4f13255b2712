import { MODE, type Change, type Entry, type Store } from '../store/store.js';
import { mapLimit } from '../util/concurrency.js';

/**
 * A change between two trees as a person (or a run) is shown it, by `nas diff`, `nas pr show` and the web page:
 * git's patch, with the full modes the metadata records hold (a setuid bit shows, 104755, where git says
 * 100755), a change of mode alone (git sees none) as a piece of its own, and, for a file the reader could not
 * read through the mount, its modes but not its content.
 */

export interface ShownFile extends Change {
  beforeMode?: number;
  afterMode?: number;
  /** The reader may not read it (before or after): the patch names it but shows none of its content. */
  withheld?: boolean;
}

export interface ShownDiff {
  files: ShownFile[];
  patch: string;
  /** Paths whose content was withheld. */
  withheld: string[];
  /** The blob versions whose content the patch carries: what the reader has now read. */
  shown: { path: string; oid: string }[];
}

export const octal = (mode: number): string => mode.toString(8).padStart(6, '0');

/** `mayRead(tree, path)`: whether the reader could read it through the mount; absent, everything shows. */
export async function shownDiff(
  store: Store, before: string, after: string, opts: { under?: string; mayRead?: (tree: string, path: string) => Promise<boolean> } = {},
): Promise<ShownDiff> {
  const { under, mayRead } = opts;
  const changes = (await store.fileChanges(before, after)).filter((c) => !under || c.path === under || c.path.startsWith(`${under}/`));
  const files = await mapLimit(changes.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0)), 8, async (c): Promise<ShownFile> => {
    const modeOf = async (tree: string, e?: Entry) => (e ? store.fullModeAt(tree, c.path, e) : undefined);
    const [beforeMode, afterMode] = await Promise.all([modeOf(before, c.before), modeOf(after, c.after)]);
    const readable = !mayRead || ((!c.before || (await mayRead(before, c.path))) && (!c.after || (await mayRead(after, c.path))));
    return { ...c, ...(beforeMode !== undefined ? { beforeMode } : {}), ...(afterMode !== undefined ? { afterMode } : {}), ...(readable ? {} : { withheld: true }) };
  });
  const pieces = await store.diffByFile(before, after);
  const out: string[] = [];
  const shown: ShownDiff['shown'] = [];
  for (const f of files) {
    const piece = pieces.get(f.path);
    const header = piece?.slice(0, piece.indexOf('\n')) ?? `diff --git a/${f.path} b/${f.path}`;
    if (f.withheld) {
      out.push([header, ...modeLines(f.beforeMode, f.afterMode), `content withheld: you could not read ${f.path} through the mount, so it is not shown here`, ''].join('\n'));
    } else if (piece) {
      out.push(withFullModes(piece, f.beforeMode, f.afterMode));
      for (const e of [f.before, f.after]) if (e && e.mode !== MODE.link) shown.push({ path: f.path, oid: e.oid });
    } else if (f.beforeMode !== f.afterMode) out.push([header, ...modeLines(f.beforeMode, f.afterMode), ''].join('\n'));
  }
  return { files, patch: out.join(''), withheld: files.filter((f) => f.withheld).map((f) => f.path), shown };
}

function modeLines(before?: number, after?: number): string[] {
  if (before === undefined) return after === undefined ? [] : [`new file mode ${octal(after)}`];
  if (after === undefined) return [`deleted file mode ${octal(before)}`];
  return before !== after ? [`old mode ${octal(before)}`, `new mode ${octal(after)}`] : [];
}

/** git's piece for one file, its mode lines (and the mode on its index line) saying the full modes. */
function withFullModes(piece: string, before?: number, after?: number): string {
  const lines = piece.split('\n');
  let end = 1;
  while (end < lines.length && /^(old mode|new mode|new file mode|deleted file mode|index) /.test(lines[end])) end++;
  const index = lines.slice(1, end).find((l) => l.startsWith('index '))?.replace(/ [0-7]{6}$/, '');
  const same = before !== undefined && before === after;
  return [lines[0], ...modeLines(before, after), ...(index ? [same ? `${index} ${octal(before)}` : index] : []), ...lines.slice(end)].join('\n');
}
