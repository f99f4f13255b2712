/**
 * The conflicting hunks of a text file changed on both sides, for the PR report (libgit2 decides whether a
 * merge conflicts; this shows a person where). Line-based: each side's changes against the base, found by a
 * longest-common-subsequence match, and the regions where both sides changed the same or adjacent lines.
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

export function conflictHunks(baseText: string, oursText: string, theirsText: string): Hunk[] | null {
  const [base, ours, theirs] = [baseText, oursText, theirsText].map((t) => t.split('\n'));
  if ((base.length + 1) * (Math.max(ours.length, theirs.length) + 1) > MAX_CELLS) return null;
  const o = edits(base, ours).map((e) => ({ ...e, side: 'ours' as const }));
  const t = edits(base, theirs).map((e) => ({ ...e, side: 'theirs' as const }));
  const all = [...o, ...t].sort((a, b) => a.from - b.from || a.to - b.to);
  const hunks: Hunk[] = [];
  for (let k = 0; k < all.length; ) {
    const group = [all[k]];
    let to = all[k].to;
    for (k++; k < all.length && all[k].from <= to; k++) {
      group.push(all[k]);
      to = Math.max(to, all[k].to);
    }
    const from = group[0].from;
    const mine = group.filter((e) => e.side === 'ours');
    const yours = group.filter((e) => e.side === 'theirs');
    if (mine.length === 0 || yours.length === 0) continue;
    const h = { line: from + 1, base: base.slice(from, to), ours: region(base, from, to, mine), theirs: region(base, from, to, yours) };
    if (h.ours.join('\n') !== h.theirs.join('\n')) hunks.push(h);
  }
  return hunks;
}
