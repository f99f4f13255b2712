/**
 * The conflicting hunks of a text file changed on both sides, for the PR report (libgit2 decides whether a
 * merge conflicts; this shows a person where). Line-based: each side's changes against the base, found by a
 * longest-common-subsequence match, and the regions where both sides changed the same or adjacent lines. The
 * same regions make the merge with conflict markers that `nas branch update` leaves in a branch.
 */

export interface Hunk {
  /** 1-based first base line of the region. */
  line: number;
  base: string[];
  ours: string[];
  theirs: string[];
}

interface Edit {
  from: number;
  to: number;
  lines: string[];
}

/** Above this many cells the quadratic match is skipped: the report names the file without hunks. */
const MAX_CELLS = 4_000_000;

function edits(base: string[], other: string[]): Edit[] {
  const n = base.length;
  const m = other.length;
  // lcs[i][j]: length of the common subsequence of base[i..] and other[j..].
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) lcs[i][j] = base[i] === other[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  }
  const out: Edit[] = [];
  let i = 0;
  let j = 0;
  let open: Edit | null = null;
  while (i < n || j < m) {
    if (i < n && j < m && base[i] === other[j]) {
      if (open) out.push(open);
      open = null;
      i++;
      j++;
      continue;
    }
    open ??= { from: i, to: i, lines: [] };
    if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) open.lines.push(other[j++]);
    else open.to = ++i;
  }
  if (open) out.push(open);
  return out;
}

/** Apply the edits that fall in [from, to) of the base to that region. */
function region(base: string[], from: number, to: number, es: Edit[]): string[] {
  const out: string[] = [];
  let at = from;
  for (const e of es) {
    out.push(...base.slice(at, e.from), ...e.lines);
    at = e.to;
  }
  return [...out, ...base.slice(at, to)];
}

/** Each region of the base that either side changed, with the edits of each side in it (adjacent edits join one region). */
function regions(base: string[], ours: string[], theirs: string[]): { from: number; to: number; mine: Edit[]; yours: Edit[] }[] {
  const o = edits(base, ours).map((e) => ({ ...e, side: 'ours' as const }));
  const t = edits(base, theirs).map((e) => ({ ...e, side: 'theirs' as const }));
  const all = [...o, ...t].sort((a, b) => a.from - b.from || a.to - b.to);
  const out: { from: number; to: number; mine: Edit[]; yours: Edit[] }[] = [];
  for (let k = 0; k < all.length; ) {
    const group = [all[k]];
    let to = all[k].to;
    for (k++; k < all.length && all[k].from <= to; k++) {
      group.push(all[k]);
      to = Math.max(to, all[k].to);
    }
    out.push({ from: group[0].from, to, mine: group.filter((e) => e.side === 'ours'), yours: group.filter((e) => e.side === 'theirs') });
  }
  return out;
}

const tooLarge = (base: string[], ours: string[], theirs: string[]) => (base.length + 1) * (Math.max(ours.length, theirs.length) + 1) > MAX_CELLS;

export function conflictHunks(baseText: string, oursText: string, theirsText: string): Hunk[] | null {
  const [base, ours, theirs] = [baseText, oursText, theirsText].map((t) => t.split('\n'));
  if (tooLarge(base, ours, theirs)) return null;
  const hunks: Hunk[] = [];
  for (const { from, to, mine, yours } of regions(base, ours, theirs)) {
    if (mine.length === 0 || yours.length === 0) continue;
    const h = { line: from + 1, base: base.slice(from, to), ours: region(base, from, to, mine), theirs: region(base, from, to, yours) };
    if (h.ours.join('\n') !== h.theirs.join('\n')) hunks.push(h);
  }
  return hunks;
}

/**
 * A three-way line merge that keeps both versions where both sides changed the same (or adjacent) lines, as git
 * writes them: `<<<<<<< ours` (its lines), `=======`, (theirs) `>>>>>>> theirs`. A region one side alone changed
 * takes that side's lines. Files too large to match line by line hold both whole versions so.
 */
export function mergeWithMarkers(baseText: string, oursText: string, theirsText: string, labels: { ours: string; theirs: string }): string {
  const [base, ours, theirs] = [baseText, oursText, theirsText].map((t) => t.split('\n'));
  const both = (a: string[], b: string[]) => [`<<<<<<< ${labels.ours}`, ...a, '=======', ...b, `>>>>>>> ${labels.theirs}`];
  if (tooLarge(base, ours, theirs)) return [...both(oursText.replace(/\n$/, '').split('\n'), theirsText.replace(/\n$/, '').split('\n')), ''].join('\n');
  const out: string[] = [];
  let at = 0;
  for (const { from, to, mine, yours } of regions(base, ours, theirs)) {
    out.push(...base.slice(at, from));
    const a = region(base, from, to, mine);
    const b = region(base, from, to, yours);
    if (yours.length === 0 || a.join('\n') === b.join('\n')) out.push(...a);
    else if (mine.length === 0) out.push(...b);
    else out.push(...both(a, b));
    at = to;
  }
  return [...out, ...base.slice(at)].join('\n');
}
