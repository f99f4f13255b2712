import { MAX_TOPIC_DEPTH, MEMORY_MD, NOTES_DIR, QUARANTINE_DIR, isTopic, topicDepth } from './layout.js';
import { isMarked, type Memory } from './model.js';
import { parseNote, setField } from './note.js';

/**
 * The owner's review of a note: label it `trust: reviewed` (editing that one line) and, for a note in
 * quarantine, move it into notes/. Only the changes are computed here; the caller commits them together
 * with the regenerated indexes.
 */

export class ReviewRefused extends Error {}

export interface ReviewPlan {
  from: string;
  to: string;
  text: string;
}

export function planReview(memory: Memory, notePath: string, description?: string): ReviewPlan {
  if (!notePath.startsWith(NOTES_DIR) && !notePath.startsWith(QUARANTINE_DIR)) {
    throw new ReviewRefused(`${notePath} is not a note: reviews apply to ${NOTES_DIR} and ${QUARANTINE_DIR}`);
  }
  const doc = memory.docs.get(notePath);
  if (!doc) throw new ReviewRefused(`${notePath} does not exist`);
  if (doc.text === undefined || !doc.note) throw new ReviewRefused(`${notePath} is not a Markdown note (binary or over 1 MiB)`);
  if (doc.note.problems.length > 0) {
    const p = doc.note.problems[0];
    throw new ReviewRefused(`${notePath}:${p.line}: ${p.message}; fix the front matter first`);
  }
  const to = notePath.startsWith(QUARANTINE_DIR) ? NOTES_DIR + notePath.slice(QUARANTINE_DIR.length) : notePath;
  // A reviewed note is a topic of MEMORY.md's index: it must be one where it lands.
  if (!isTopic(to, NOTES_DIR, MEMORY_MD, new Set()) || topicDepth(to, NOTES_DIR) > MAX_TOPIC_DEPTH) {
    throw new ReviewRefused(`${to} would not be a topic (README.md, resident.md, _ or . names, or deeper than <topic>/<subtopic>.md): move it in a branch first`);
  }
  if (to !== notePath && memory.files.some((f) => f.path === to)) {
    throw new ReviewRefused(`${to} exists already; nothing was changed. Rename one of them in a branch first`);
  }
  if (doc.note.trust === 'reviewed' && to === notePath) throw new ReviewRefused(`${notePath} is reviewed already`);
  // Only an index needs the description: a scope without markers keeps single-file memory.
  if (!doc.note.description && !description && isMarked(memory, MEMORY_MD)) {
    throw new ReviewRefused(`${notePath} has no description; pass --description "<when to read this>" (the index lists it)`);
  }
  let text = setField(doc.text, 'trust', 'reviewed');
  // JSON strings are valid YAML double-quoted scalars.
  if (description) text = setField(text, 'description', JSON.stringify(description.replace(/\s+/g, ' ').trim()));
  const after = parseNote(text);
  if (after.problems.length > 0 || after.trust !== 'reviewed') {
    throw new ReviewRefused(`${notePath}: its front matter cannot be edited safely (${after.problems[0]?.message ?? 'trust did not change'}); fix it in a branch first`);
  }
  return { from: notePath, to, text };
}
