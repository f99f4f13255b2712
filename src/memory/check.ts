import type { LimitsConfig } from '../config/home-config.js';
import type { HomeFile } from './files.js';
import { formatSize } from './index-block.js';
import { INBOX_DIR, JOURNAL_DIR, MEMORY_MD, QUARANTINE_DIR, SKILLS_DIR, START_SET, isNote, isStartFile } from './layout.js';
import { isReviewed, markedIndexes, type Memory, type MemoryDoc, type Trusted } from './model.js';
import { countTokens } from './tokens.js';
import { relativeLinks } from './links.js';

/**
 * The memory checks (SPEC.md, "Two-tier memory"; issue "Memory that fits the context window"). Every rule
 * runs on everything; a problem in one file never stops the others. Nothing is rewritten here.
 */

export type Rule =
  | 'front-matter' | 'binary' | 'too-large'
  | 'trust-label' | 'trust-claim' | 'unreviewed-in-start-set'
  | 'index-markers' | 'index-stale' | 'index-size'
  | 'topic-description' | 'topic-size' | 'topic-depth' | 'topic-updated' | 'description-length'
  | 'memory-tokens' | 'resident-budget' | 'missing-file' | 'skill-front-matter' | 'shared-scope';

export interface Finding {
  level: 'error' | 'warning';
  rule: Rule;
  path: string;
  line?: number;
  message: string;
}

export interface StartFile {
  path: string;
  bytes: number;
  budget: number;
  tokens: number;
}

export interface CheckReport {
  ok: boolean;
  errors: number;
  warnings: number;
  findings: Finding[];
  startSet: StartFile[];
  memoryTokens?: { tokens: number; cap: number };
  notes: number;
  /** Index files with markers: their scope has a generated index. */
  indexes: string[];
  /** Index files without markers: their scope keeps single-file memory (markers are opt-in). */
  singleFile: string[];
}

export const TOPIC_MAX = 32 * 1024;
export const TOPIC_WARN = 16 * 1024;
export const DESCRIPTION_WARN = 300;
export const BLOCK_WARN = 8 * 1024;

export function checkMemory(memory: Memory, limits: LimitsConfig): CheckReport {
  const findings: Finding[] = [];
  const add = (level: Finding['level'], rule: Rule, p: string, message: string, line?: number) => {
    if (!findings.some((f) => f.rule === rule && f.path === p && f.message === message)) findings.push({ level, rule, path: p, line, message });
  };

  for (const doc of memory.docs.values()) checkDocument(doc, add, memory.fromMain);
  // A scope without markers keeps single-file memory: no index, so no index or topic rules.
  for (const index of markedIndexes(memory)) {
    for (const p of index.problems) add('error', 'index-markers', index.path, p.message, p.line);
    for (const t of index.tooDeep) {
      add('error', 'topic-depth', t.file.path, `nested too deep below ${index.root}: topics are <topic>.md or <topic>/<subtopic>.md`);
    }
    for (const t of index.topics) checkTopic(t, add);
    const blockSize = Buffer.byteLength(index.wanted);
    if (blockSize > BLOCK_WARN) add('warning', 'index-size', index.path, `the index block is ${formatSize(blockSize)}, over ${formatSize(BLOCK_WARN)}: split topics under sub-indexes`);
    const text = memory.docs.get(index.path)?.text;
    if (index.block && text !== undefined && text.slice(index.block.from, index.block.to) !== index.wanted) {
      add('error', 'index-stale', index.path, "the index block does not match the topics' front matter; regenerate it with: nas memory index <role>@<branch>", index.block.line);
    }
  }
  const startSet = checkStartSet(memory, limits, add);
  const memoryDoc = memory.docs.get(MEMORY_MD);
  let memoryTokens: CheckReport['memoryTokens'];
  if (memoryDoc?.text !== undefined) {
    memoryTokens = { tokens: countTokens(memoryDoc.text), cap: limits.memory_md_max_tokens };
    if (memoryTokens.tokens > memoryTokens.cap) {
      add('error', 'memory-tokens', MEMORY_MD, `${memoryTokens.tokens} tokens (o200k_base), over the cap of ${memoryTokens.cap} in .nas/limits.yaml by ${memoryTokens.tokens - memoryTokens.cap}; shorten it or move entries to a sub-index (nothing was truncated)`);
    }
  }
  findings.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : (a.line ?? 0) - (b.line ?? 0)));
  const errors = findings.filter((f) => f.level === 'error').length;
  return {
    ok: errors === 0,
    errors,
    warnings: findings.length - errors,
    findings,
    startSet,
    memoryTokens,
    notes: [...memory.docs.keys()].filter(isNote).length,
    indexes: markedIndexes(memory).map((i) => i.path),
    singleFile: memory.indexes.filter((i) => !i.marked).map((i) => i.path),
  };
}

type Add = (level: Finding['level'], rule: Rule, p: string, message: string, line?: number) => void;

function checkDocument(doc: MemoryDoc, add: Add, fromMain?: Trusted): void {
  const p = doc.file.path;
  if (doc.binary) return add('error', 'binary', p, 'not UTF-8 text (binary content): notes and memory files must be Markdown text');
  if (doc.text === undefined) return add('error', 'too-large', p, `${formatSize(doc.file.size)}: too large to be memory; move it to outbox/ or workspace/`);
  const note = doc.note!;
  for (const problem of note.problems) add('error', 'front-matter', p, problem.message, problem.line);
  if (p.startsWith(SKILLS_DIR)) checkSkill(doc, add);
  if (note.trust !== 'reviewed' || !p.startsWith('memory/')) return;
  if (p.startsWith(QUARANTINE_DIR)) {
    add('error', 'trust-label', p, `a note in quarantine is unreviewed by definition; the owner promotes it with: nas memory review <role> ${p}`, 1);
  } else if (!isReviewed(doc, fromMain)) {
    add('error', 'trust-claim', p, 'says "trust: reviewed" but was created or changed in this branch; only the owner sets it (nas memory review). Set "trust: unreviewed"', 1);
  }
}

function checkTopic(doc: MemoryDoc, add: Add): void {
  const p = doc.file.path;
  const size = doc.file.size;
  if (size > TOPIC_MAX) add('error', 'topic-size', p, `${formatSize(size)}, over the ${formatSize(TOPIC_MAX)} limit for a topic: split it into subtopics`);
  else if (size > TOPIC_WARN) add('warning', 'topic-size', p, `${formatSize(size)}, over ${formatSize(TOPIC_WARN)}: consider splitting it`);
  if (!doc.note || doc.note.problems.length > 0) return;
  if (!doc.note.description) add('error', 'topic-description', p, 'no description in the front matter: add "description: <when to read this>"', 1);
  else if (doc.note.description.length > DESCRIPTION_WARN) {
    add('warning', 'description-length', p, `description is ${doc.note.description.length} characters, over ${DESCRIPTION_WARN}: a trigger sentence is enough`, 1);
  }
  if (!doc.note.updated) add('warning', 'topic-updated', p, 'no "updated" date in the front matter', 1);
}

function checkSkill(doc: MemoryDoc, add: Add): void {
  const note = doc.note!;
  for (const field of ['name', 'description']) {
    if (typeof note.data[field] !== 'string' || note.data[field] === '') {
      add('error', 'skill-front-matter', doc.file.path, `a skill's front matter needs "${field}" (Agent Skills convention)`, 1);
    }
  }
}

/** Byte budgets of the resident set, and no link from it to anything unreviewed. */
function checkStartSet(memory: Memory, limits: LimitsConfig, add: Add): StartFile[] {
  const out: StartFile[] = [];
  for (const { path: p, budget } of START_SET) {
    const doc = memory.docs.get(p);
    if (!doc) {
      if (p !== 'memory/resident.md') add('error', 'missing-file', p, 'missing: the start set needs it (see the Home template)');
      continue;
    }
    const limit = limits.resident_bytes[budget];
    const bytes = doc.file.size;
    out.push({ path: p, bytes, budget: limit, tokens: doc.text === undefined ? 0 : countTokens(doc.text) });
    if (bytes > limit) add('error', 'resident-budget', p, `${bytes} bytes, over the ${budget} budget of ${limit} by ${bytes - limit} (nothing was truncated)`);
    if (doc.text !== undefined) checkLinks(doc, memory, add);
  }
  const total = out.reduce((n, f) => n + f.bytes, 0);
  if (total > limits.resident_bytes.total) {
    add('error', 'resident-budget', START_SET.map((s) => s.path).join(' + '),
      `the start set is ${total} bytes, over the total budget of ${limits.resident_bytes.total} by ${total - limits.resident_bytes.total}`);
  }
  return out;
}

function checkLinks(doc: MemoryDoc, memory: Memory, add: Add): void {
  for (const link of relativeLinks(doc.file.path, doc.text!)) {
    const linked = memory.docs.get(link.path);
    // Index files are generated listings (their topics are checked on their own); notes and topics must be
    // reviewed; the journal, quarantine and inbox never are.
    const isIndex = memory.indexes.some((i) => i.path === link.path);
    const unreviewed = [QUARANTINE_DIR, JOURNAL_DIR, INBOX_DIR].some((d) => `${link.path}/`.startsWith(d)) ||
      (linked && link.path.startsWith('memory/') && !isStartFile(link.path) && !isIndex && !isReviewed(linked, memory.fromMain));
    if (unreviewed) {
      add('error', 'unreviewed-in-start-set', doc.file.path, `links to ${link.path}, which is not reviewed: nothing unreviewed may be loaded at start`, link.line);
    }
  }
}

/** Content ids by path, for CheckOptions.base. */
export const idsByPath = (files: readonly HomeFile[]): Map<string, string> => new Map(files.map((f) => [f.path, f.id]));
