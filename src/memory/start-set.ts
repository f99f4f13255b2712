import { findBlock } from './index-block.js';
import { isStartFile, MEMORY_MD, SKILLS_DIR } from './layout.js';
import { relativeLinks } from './links.js';

/**
 * Auto-loaded context: what an agent takes in at session start without asking for it (AGENTS.md and the
 * CLAUDE.md that links to it, the start set, skills). The seeds' rule: it comes only from reviewed content,
 * so a change to it waits for the owner.
 */
function isAutoLoaded(path: string): boolean {
  return path === 'AGENTS.md' || path === 'CLAUDE.md' || isStartFile(path) || path.startsWith(SKILLS_DIR);
}

/** MEMORY.md's own words: its text without the generated index block (which only the index rules write). */
function withoutIndexBlock(text: string): string {
  const { block } = findBlock(text);
  return block ? text.slice(0, block.from) + text.slice(block.to) : text;
}

/** What AGENTS.md links to (in any of the given versions of it): an agent that follows its rules reads those too. */
export function linkedFromAgents(versions: readonly (string | null)[]): Set<string> {
  return new Set(versions.flatMap((text) => (text === null ? [] : relativeLinks('AGENTS.md', text).map((l) => l.path))));
}

/**
 * The changed paths that change auto-loaded context, or what AGENTS.md links to (`linked`). MEMORY.md counts
 * only when its own words change: regenerating its index is what every new note does.
 */
export async function autoLoadedChanges(
  changes: readonly { path: string; before?: { oid: string }; after?: { oid: string } }[],
  text: (oid: string) => Promise<string>,
  linked: ReadonlySet<string> = new Set(),
): Promise<string[]> {
  const out: string[] = [];
  for (const c of changes) {
    if (!isAutoLoaded(c.path) && !linked.has(c.path)) continue;
    if (c.path === MEMORY_MD && c.before && c.after && withoutIndexBlock(await text(c.before.oid)) === withoutIndexBlock(await text(c.after.oid))) continue;
    out.push(c.path);
  }
  return out;
}
