import { mapLimit } from '../util/concurrency.js';
import type { FileSet, HomeFile } from './files.js';
import { findBlock, renderBlock, replaceBlock, type Block, type TopicEntry } from './index-block.js';
import { JOURNAL_DIR, MAX_TOPIC_DEPTH, MEMORY_MD, SKILLS_DIR, isIndexFile, isMarkdown, isTopic, topicDepth, topicRoot } from './layout.js';
import { parseNote, type Note, type NoteProblem } from './note.js';
import { decodeText } from '../util/text.js';

/**
 * A Home's memory as read once: every Markdown file of the memory roots with its text and front matter, and
 * every index file with its topics and the block it should carry. Checks, regeneration, context, briefing
 * and measuring are pure functions of this.
 */

/** Files larger than this are not read at all: nothing that big can be a note (topics stop at 32 KB). */
export const READ_LIMIT = 1024 * 1024;

export interface MemoryDoc {
  file: HomeFile;
  /** Undefined when the file is binary or over READ_LIMIT. */
  text?: string;
  binary: boolean;
  note?: Note;
}

export interface IndexFile {
  path: string;
  root: string;
  /**
   * Whether the file carries index markers: the scope opted in to a generated index. Without, the scope keeps
   * single-file memory: nothing is generated into it and its topics are not index-checked.
   */
  marked: boolean;
  block?: Block;
  problems: NoteProblem[];
  topics: MemoryDoc[];
  /** Topics nested deeper than `<topic>/<subtopic>.md`: not listed, reported. */
  tooDeep: MemoryDoc[];
  /** The block content the topics call for right now. */
  wanted: string;
}

export interface Memory {
  files: HomeFile[];
  /** For a branch: whether a path's content is main's reviewed content (see isReviewed). */
  fromMain?: Trusted;
  docs: Map<string, MemoryDoc>;
  indexes: IndexFile[];
}

/** Markdown the memory tools parse: AGENTS.md, memory/ (not the raw journal), skills' SKILL.md. */
const parsed = (p: string): boolean =>
  isMarkdown(p) && !p.startsWith(JOURNAL_DIR) && (p.startsWith('memory/') || p === 'AGENTS.md' || (p.startsWith(SKILLS_DIR) && p.endsWith('/SKILL.md')));

/**
 * Whether a note counts as reviewed: it says so, and (in a branch) it is unchanged since the fork, because
 * only the owner's review on main sets the label. A claim the branch made itself is treated as unreviewed.
 */
export type Trusted = (path: string, id: string) => boolean;

export function isReviewed(doc: MemoryDoc, fromMain?: Trusted): boolean {
  return doc.note?.trust === 'reviewed' && (!fromMain || fromMain(doc.file.path, doc.file.id));
}

export async function loadMemory(set: FileSet, fromMain?: Trusted): Promise<Memory> {
  const files = await set.list();
  const wanted = files.filter((f) => parsed(f.path));
  const docs = new Map<string, MemoryDoc>();
  await mapLimit(wanted, 16, async (file) => {
    if (file.size > READ_LIMIT) return void docs.set(file.path, { file, binary: false });
    const text = decodeText(await set.read(file));
    docs.set(file.path, text === null ? { file, binary: true } : { file, text, binary: false, note: parseNote(text) });
  });
  const indexPaths = new Set([...docs.keys()].filter(isIndexFile));
  const indexes = [...indexPaths].map((p) => indexOf(docs.get(p)!, docs, indexPaths, fromMain));
  indexes.sort((a, b) => (a.path < b.path ? -1 : 1));
  return { files, fromMain, docs, indexes };
}

function topicEntry(doc: MemoryDoc, fromMain?: Trusted): TopicEntry {
  return {
    path: doc.file.path,
    size: doc.file.size,
    description: doc.note?.description,
    updated: doc.note?.updated,
    trust: isReviewed(doc, fromMain) ? 'reviewed' : 'unreviewed',
  };
}

function indexOf(doc: MemoryDoc, docs: Map<string, MemoryDoc>, indexPaths: ReadonlySet<string>, fromMain?: Trusted): IndexFile {
  const root = topicRoot(doc.file.path);
  const { block, problems, marked } = doc.text !== undefined ? findBlock(doc.text) : { block: undefined, problems: [], marked: false };
  const candidates = [...docs.values()].filter((d) => isTopic(d.file.path, root, doc.file.path, indexPaths));
  const tooDeep = candidates.filter((d) => topicDepth(d.file.path, root) > MAX_TOPIC_DEPTH);
  // The auto-loaded index (MEMORY.md) lists reviewed notes only: nothing unreviewed reaches the start set.
  const topics = candidates.filter((d) => !tooDeep.includes(d));
  const listed = topics.filter((d) => doc.file.path !== MEMORY_MD || isReviewed(d, fromMain));
  return { path: doc.file.path, root, marked, block, problems, topics, tooDeep, wanted: renderBlock(doc.file.path, root, listed.map((d) => topicEntry(d, fromMain))) };
}

/** The index files that opted in to a generated index (they carry the markers). */
export const markedIndexes = (memory: Memory): IndexFile[] => memory.indexes.filter((i) => i.marked);

/** Whether a scope's index file opted in: MEMORY.md for the Home's own scope. */
export const isMarked = (memory: Memory, indexPath: string): boolean => memory.indexes.some((i) => i.path === indexPath && i.marked);

/** Index files whose block differs from what their topics call for, with the regenerated text. */
export function regenerate(memory: Memory): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  for (const index of markedIndexes(memory)) {
    const text = memory.docs.get(index.path)?.text;
    if (!index.block || text === undefined) continue;
    if (text.slice(index.block.from, index.block.to) === index.wanted) continue;
    out.push({ path: index.path, text: replaceBlock(text, index.block, index.wanted) });
  }
  return out;
}
