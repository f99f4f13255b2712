import path from 'node:path';
import { QUARANTINE_DIR } from './layout.js';
import { parseNote, setField } from './note.js';
import { decodeText } from '../util/text.js';

/**
 * Importing memory written for another framework (a CLAUDE.md, Cursor rules, plain notes). The mapping is
 * lossy, so every import lands in quarantine as `trust: unreviewed` (SPEC.md, Agent Home, requirement 9)
 * with its origin in `source`; the content itself is kept byte for byte.
 */

export interface Imported {
  path: string;
  text: string;
}

/** The framework a file name suggests: it goes into the note's `source` field. */
function formatOf(name: string): string {
  const base = path.posix.basename(name).toLowerCase();
  if (base.endsWith('.mdc')) return 'cursor';
  if (base === 'claude.md') return 'claude';
  if (base === 'agents.md') return 'agents';
  if (base === 'gemini.md') return 'gemini';
  return base.endsWith('.md') ? 'markdown' : 'text';
}

/** A safe file name in quarantine: no directories, no hidden or private prefix, nothing outside [A-Za-z0-9._-]. */
export function quarantineName(name: string): string {
  const stem = path.posix.basename(name.replace(/\\/g, '/')).replace(/\.(md|mdc|txt|markdown)$/i, '');
  const safe = stem.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[-._]+/, '').slice(0, 100) || 'imported';
  return `${QUARANTINE_DIR}${safe}.md`;
}

/** A trigger sentence when the source has none: its first heading, else its first line, at most 200 characters. */
function guessDescription(body: string): string {
  const line = body.split('\n').map((l) => l.trim()).find((l) => l !== '' && !/^(---|```)/.test(l)) ?? 'Imported note';
  const text = line.replace(/^#+\s*/, '').replace(/\s+/g, ' ');
  return text.length <= 200 ? text : `${text.slice(0, 200).replace(/\s+\S*$/, '')} ...`;
}

export function importNote(name: string, content: Buffer, today: string): Imported {
  const decoded = decodeText(content);
  if (decoded === null) throw new Error(`${name}: binary content; only text can be imported as a note`);
  const note = parseNote(decoded);
  // Front matter that does not parse is kept, untouched, inside the body under a new front matter.
  const broken = note.problems.length > 0;
  let text = broken ? `---\ntrust: unreviewed\n---\n${decoded}` : setField(decoded, 'trust', 'unreviewed');
  if (broken || !note.description) text = setField(text, 'description', JSON.stringify(guessDescription(note.body)));
  if (broken || !note.updated) text = setField(text, 'updated', today);
  if (broken || !note.source) text = setField(text, 'source', JSON.stringify(`${formatOf(name)}:${path.posix.basename(name.replace(/\\/g, '/'))}`));
  return { path: quarantineName(name), text };
}
