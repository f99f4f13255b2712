import path from 'node:path';

/**
 * Where memory lives in a Home (SPEC.md, "Agent Home" and "Two-tier memory"). Paths are relative to the
 * Home's root, with forward slashes.
 */

export type Budget = 'rules' | 'shared' | 'agent';

/** The resident tier, read at the start of every session, each file with its byte budget. */
export const START_SET: readonly { path: string; budget: Budget }[] = [
  { path: 'AGENTS.md', budget: 'rules' },
  { path: 'memory/MEMORY.md', budget: 'shared' },
  { path: 'memory/resident.md', budget: 'agent' },
];

export const MEMORY_MD = 'memory/MEMORY.md';
export const NOTES_DIR = 'memory/notes/';
export const QUARANTINE_DIR = 'memory/quarantine/';
export const JOURNAL_DIR = 'memory/journal/';
export const INBOX_DIR = 'inbox/';
export const SKILLS_DIR = 'skills/';

/** Trees the memory tools read; everything else in a Home (outbox, workspace) is not memory. */
export const MEMORY_ROOTS = ['AGENTS.md', 'memory/', 'skills/', 'inbox/'];

export const INDEX_START = '<!-- nas:index:start -->';
export const INDEX_END = '<!-- nas:index:end -->';

/** Directories that never hold topics: deliverables, local or carried-over state, raw logs, unreviewed notes. */
const NEVER_TOPIC_DIRS = new Set(['outbox', 'local', 'carryover', 'journal', 'quarantine']);

export const isMarkdown = (p: string): boolean => p.toLowerCase().endsWith('.md');
export const isNote = (p: string): boolean => p.startsWith(NOTES_DIR) || p.startsWith(QUARANTINE_DIR);
export const isStartFile = (p: string): boolean => START_SET.some((s) => s.path === p);

/**
 * Index files: MEMORY.md, and any INDEX.md under memory/ outside the journal and quarantine. Only these
 * carry a generated block; marker text anywhere else is just text.
 */
export function isIndexFile(p: string): boolean {
  if (p === MEMORY_MD) return true;
  return p.startsWith('memory/') && path.posix.basename(p) === 'INDEX.md' && !p.startsWith(JOURNAL_DIR) && !p.startsWith(QUARANTINE_DIR);
}

/** The directory whose Markdown files an index lists: MEMORY.md indexes the notes, any other index its own directory. */
export function topicRoot(indexPath: string): string {
  return indexPath === MEMORY_MD ? NOTES_DIR : `${path.posix.dirname(indexPath)}/`;
}

/**
 * Whether a Markdown file under an index's topic root is one of its topics (depth is checked separately).
 * A directory with its own INDEX.md belongs to that index, not to the one above.
 */
export function isTopic(home: string, root: string, indexPath: string, indexes: ReadonlySet<string>): boolean {
  if (!home.startsWith(root) || home === indexPath || !isMarkdown(home) || indexes.has(home)) return false;
  for (let dir = path.posix.dirname(home); dir.length + 1 > root.length; dir = path.posix.dirname(dir)) {
    if (indexes.has(`${dir}/INDEX.md`) && `${dir}/INDEX.md` !== indexPath) return false;
  }
  if (home.startsWith(JOURNAL_DIR) || home.startsWith(QUARANTINE_DIR) || isStartFile(home)) return false;
  const parts = home.slice(root.length).split('/');
  const name = parts[parts.length - 1];
  if (name === 'resident.md' || name.toLowerCase() === 'readme.md') return false;
  return parts.every((p, i) => !p.startsWith('_') && !p.startsWith('.') && (i === parts.length - 1 || !NEVER_TOPIC_DIRS.has(p)));
}

/** Topics may sit at `<topic>.md` or `<topic>/<subtopic>.md` below their root, no deeper. */
export const topicDepth = (home: string, root: string): number => home.slice(root.length).split('/').length;
export const MAX_TOPIC_DEPTH = 2;
