import matter from 'gray-matter';
import yaml from 'js-yaml';

/**
 * Notes: Markdown with YAML front matter (`description`, `updated`, `trust`, optional `source`).
 * Parsing never throws: what is wrong comes back as problems with the file's line number.
 */

export type Trust = 'reviewed' | 'unreviewed';

export interface NoteProblem {
  line: number;
  message: string;
}

export interface Note {
  /** The front matter as parsed; empty when the file has none. */
  data: Record<string, unknown>;
  hasFrontMatter: boolean;
  description?: string;
  /** YYYY-MM-DD when the date parses, else the text as written. */
  updated?: string;
  /** A note without a trust label is unreviewed. */
  trust: Trust;
  source?: string;
  body: string;
  problems: NoteProblem[];
}

const FENCE = /^---[ \t]*\r?$/;
const options = { engines: { yaml: (text: string) => yaml.load(text) as object } };

export function parseNote(text: string): Note {
  const note: Note = { data: {}, hasFrontMatter: false, trust: 'unreviewed', body: text, problems: [] };
  const lines = text.split('\n');
  if (!FENCE.test(lines[0] ?? '')) return note;
  const close = lines.findIndex((l, i) => i > 0 && FENCE.test(l));
  if (close < 0) {
    note.problems.push({ line: 1, message: 'front matter starts with --- but never ends: add a closing --- line' });
    return note;
  }
  note.hasFrontMatter = true;
  try {
    const parsed = matter(text, options);
    note.body = parsed.content;
    if (parsed.data === null || typeof parsed.data !== 'object' || Array.isArray(parsed.data)) {
      note.problems.push({ line: 2, message: 'front matter must be a mapping of fields (description: ..., updated: ...)' });
      return note;
    }
    note.data = parsed.data as Record<string, unknown>;
  } catch (err) {
    const mark = (err as { mark?: { line: number } }).mark;
    // js-yaml counts from the opening --- line (gray-matter keeps its newline in the YAML text).
    const line = Math.min(1 + (mark?.line ?? 1), close + 1);
    const reason = (err as { reason?: string }).reason ?? (err as Error).message.split('\n')[0];
    note.problems.push({ line, message: `front matter is not valid YAML: ${reason}` });
    note.body = lines.slice(close + 1).join('\n');
    return note;
  }
  const lineOf = (key: string) => 1 + Math.max(1, lines.slice(0, close).findIndex((l) => l.startsWith(`${key}:`)));
  const field = (key: string): string | undefined => {
    const v = note.data[key];
    if (v === undefined || v === null) return undefined;
    if (v instanceof Date) return Number.isNaN(v.getTime()) ? undefined : v.toISOString().slice(0, 10);
    if (typeof v === 'string' || typeof v === 'number') return String(v);
    note.problems.push({ line: lineOf(key), message: `${key} must be text, not ${Array.isArray(v) ? 'a list' : 'a mapping'}` });
    return undefined;
  };
  note.description = field('description')?.replace(/\s+/g, ' ').trim() || undefined;
  note.updated = field('updated');
  note.source = field('source');
  const trust = field('trust');
  if (trust === 'reviewed' || trust === 'unreviewed') note.trust = trust;
  else if (trust !== undefined) note.problems.push({ line: lineOf('trust'), message: `trust must be "reviewed" or "unreviewed", not "${trust}"` });
  return note;
}

/**
 * Set one top-level front-matter field by editing its lines only (the key's line and any continuation lines
 * of a multi-line value), so the rest of the file stays byte for byte as written, line endings included.
 * A file without front matter gets one.
 */
export function setField(text: string, key: string, value: string): string {
  const lines = text.split('\n');
  const eol = lines[0]?.endsWith('\r') ? '\r' : '';
  const line = `${key}: ${value}${eol}`;
  const close = FENCE.test(lines[0] ?? '') ? lines.findIndex((l, i) => i > 0 && FENCE.test(l)) : -1;
  if (close < 0) return `---${eol}\n${line}\n---${eol}\n${text}`;
  const at = lines.findIndex((l, i) => i > 0 && i < close && l.startsWith(`${key}:`));
  if (at < 0) {
    lines.splice(close, 0, line);
    return lines.join('\n');
  }
  let end = at + 1;
  while (end < close && /^[ \t]/.test(lines[end])) end++;
  lines.splice(at, end - at, line);
  return lines.join('\n');
}
