import { MEMORY_MD, NOTES_DIR, QUARANTINE_DIR } from './layout.js';
import { isMarked, isReviewed, type Memory } from './model.js';
import { setField } from './note.js';

/**
 * Shared scopes (SPEC.md, "Two-tier memory"): a Home whose `.nas/role.yaml` lists `shared: [team]` reads team's
 * memory index on demand. The shared Home's memory is a reviewed distillation: it changes only through PRs into
 * that Home (`nas memory share`), never by a run (a run sees only its own branch).
 */

export interface SharedTopic {
  path: string;
  description?: string;
}

/** What a reader of a shared scope is shown: its index file, and the reviewed topics that index lists. */
export interface SharedIndex {
  /** Undefined when the shared Home has no memory/MEMORY.md. */
  index?: string;
  topics: SharedTopic[];
}

/**
 * The shared scope's index as read from its main: with markers, the reviewed notes MEMORY.md's generated index
 * lists; without (single-file memory), MEMORY.md alone. Nothing unreviewed is shown to another Home.
 */
export function sharedIndex(memory: Memory): SharedIndex {
  const index = memory.docs.has(MEMORY_MD) ? MEMORY_MD : undefined;
  if (!isMarked(memory, MEMORY_MD)) return { index, topics: [] };
  const listed = memory.indexes.find((i) => i.path === MEMORY_MD)!.topics.filter((d) => isReviewed(d));
  return { index, topics: listed.map((d) => ({ path: d.file.path, ...(d.note?.description ? { description: d.note.description } : {}) })) };
}

/** Problems with a `shared:` list: a Home that is not there, or the Home itself. `known` says whether a Home exists. */
export function sharedProblems(role: string, shared: readonly string[], known: (home: string) => string | null): string[] {
  const out: string[] = [];
  for (const home of shared) {
    if (home === role) out.push(`shared names "${home}", this Home itself: list other Homes whose memory it reads`);
    else {
      const why = known(home);
      if (why) out.push(`shared names "${home}": ${why}; its memory is left out of the context until that is fixed`);
    }
  }
  return out;
}

/** One shared scope in a context: its index and reviewed topics (paths relative to `root`), or why it is left out. */
export interface SharedContext extends Partial<SharedIndex> {
  home: string;
  root?: string;
  problem?: string;
}

export interface SharedContexts {
  /** The shared scopes `.nas/role.yaml` lists (`shared:`), each read from its Home's main: read on demand only. */
  shared: SharedContext[];
}

/** `nas memory share`: the copy proposed to the shared Home, as a PR there. */
export interface ShareResult {
  from: string;
  note: string;
  to: string;
  path: string;
  branch: string;
  pr: number;
  prState: string;
}

export class ShareRefused extends Error {}

/**
 * A reviewed note of `from`'s main as it is proposed to a shared Home: into that Home's quarantine under
 * `from-<role>/`, labelled unreviewed with its source, so the shared Home's gate and its owner's review decide
 * what its readers see (a review claim made in a branch never counts).
 */
export function sharedCopy(memory: Memory, from: { role: string; commit: string }, notePath: string): { path: string; text: string } {
  if (!notePath.startsWith(NOTES_DIR)) throw new ShareRefused(`${notePath} is not a reviewed note: only notes under ${NOTES_DIR} can be shared`);
  const doc = memory.docs.get(notePath);
  if (!doc) throw new ShareRefused(`${notePath} does not exist in ${from.role}'s main`);
  if (doc.text === undefined || !doc.note) throw new ShareRefused(`${notePath} is not a Markdown note (binary or over 1 MiB)`);
  if (doc.note.problems.length > 0) throw new ShareRefused(`${notePath}:${doc.note.problems[0].line}: ${doc.note.problems[0].message}; fix it first`);
  if (!isReviewed(doc)) {
    throw new ShareRefused(`${notePath} is not reviewed in ${from.role}'s main: only reviewed notes are shared. Review it first: nas memory review ${from.role} ${notePath}`);
  }
  const source = `${from.role}@${from.commit.slice(0, 12)}:${notePath}`;
  const text = setField(setField(doc.text, 'trust', 'unreviewed'), 'source', source);
  return { path: `${QUARANTINE_DIR}from-${from.role}/${notePath.slice(NOTES_DIR.length)}`, text };
}
