import path from 'node:path';
import { INDEX_END, INDEX_START } from './layout.js';
import type { NoteProblem, Trust } from './note.js';

/** The generated block between `<!-- nas:index:start -->` and `<!-- nas:index:end -->` in an index file. */

export interface Block {
  /** Offsets of the block's content: just after the start marker's line, and at the start of the end marker's line. */
  from: number;
  to: number;
  /** 1-based line of the start marker. */
  line: number;
}

export interface TopicEntry {
  path: string;
  description?: string;
  updated?: string;
  size: number;
  trust: Trust;
}

/**
 * Locate the one marker pair; every way the markers can be wrong comes back as a problem with its line. Markers
 * are opt-in per scope (SPEC.md, "Two-tier memory"): a file with no marker at all keeps single-file memory,
 * `marked: false` and no problem; one marker alone is a half-made opt-in, reported.
 */
export function findBlock(text: string): { block?: Block; problems: NoteProblem[]; marked: boolean } {
  const problems: NoteProblem[] = [];
  const starts: { line: number; offset: number; end: number }[] = [];
  const ends: { line: number; offset: number }[] = [];
  let offset = 0;
  let fenced = false;
  text.split('\n').forEach((raw, i) => {
    const line = raw.replace(/\r$/, '');
    const next = offset + raw.length + 1;
    // Markers shown inside a code block are examples, not markers.
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) return void (offset = next);
    for (const [marker, name] of [[INDEX_START, 'start'], [INDEX_END, 'end']] as const) {
      if (!line.includes(marker)) continue;
      if (line.trim() !== marker) problems.push({ line: i + 1, message: `the index ${name} marker must be alone on its line, exactly ${marker}` });
      else if (name === 'start') starts.push({ line: i + 1, offset, end: Math.min(next, text.length) });
      else ends.push({ line: i + 1, offset });
    }
    offset = next;
  });
  for (const dup of starts.slice(1)) problems.push({ line: dup.line, message: `duplicate ${INDEX_START} (the first is on line ${starts[0].line})` });
  for (const dup of ends.slice(1)) problems.push({ line: dup.line, message: `duplicate ${INDEX_END} (the first is on line ${ends[0].line})` });
  if (starts.length === 0 && ends.length === 0 && problems.length === 0) return { problems, marked: false };
  if (starts.length === 0 && ends.length > 0) {
    problems.push({ line: ends[0].line, message: `${INDEX_END} without ${INDEX_START} before it` });
  } else if (ends.length === 0 && starts.length > 0) {
    problems.push({ line: starts[0].line, message: `${INDEX_START} without ${INDEX_END} after it` });
  } else if (starts.length > 0 && ends[0].offset < starts[0].offset) {
    problems.push({ line: ends[0].line, message: `${INDEX_END} comes before ${INDEX_START}` });
  }
  if (problems.length > 0) return { problems, marked: true };
  return { block: { from: starts[0].end, to: ends[0].offset, line: starts[0].line }, problems, marked: true };
}

const KB = 1024;
export function formatSize(bytes: number): string {
  return bytes < KB ? `${bytes} B` : `${(bytes / KB).toFixed(1)} KB`;
}

/** A Markdown link target: angle brackets when the path has spaces or parentheses. */
const linkTarget = (p: string): string => (/[\s()<>]/.test(p) ? `<${p.replace(/[<>]/g, encodeURIComponent)}>` : p);

/**
 * The block's content for an index file: one line per topic, sorted by path: link, description, updated
 * date, size. Topics without a description still get a line (the check reports them).
 */
export function renderBlock(indexPath: string, root: string, topics: readonly TopicEntry[]): string {
  const dir = path.posix.dirname(indexPath);
  const lines = [...topics]
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    .map((t) => {
      const name = t.path.slice(root.length).replace(/\.md$/i, '').replace(/[[\]]/g, '');
      const label = t.trust === 'reviewed' ? '' : ' [unreviewed]';
      // A description must not be able to close the block or open a comment.
      const what = (t.description ?? '(no description)').replace(/<!--/g, '&lt;!--').replace(/-->/g, '--&gt;');
      return `- [${name}](${linkTarget(path.posix.relative(dir, t.path))})${label}: ${what} (updated ${t.updated ?? 'unknown'}, ${formatSize(t.size)})\n`;
    });
  return lines.join('');
}

export function replaceBlock(text: string, block: Block, content: string): string {
  return text.slice(0, block.from) + content + text.slice(block.to);
}
