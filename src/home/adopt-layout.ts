import { posix } from 'node:path';
import { MODE, type Entry, type Store } from '../store/store.js';
import { BUILT_IN_IGNORE } from '../policy/policy.js';
import type { TemplateFile } from './template.js';

/**
 * What `nas home adopt` proposes besides the repository's own `.nas/`: the Home's whole layout (the template's
 * AGENTS.md, CLAUDE.md link, memory/, inbox/, outbox/, skills/, .gitignore) wherever the repository has nothing
 * of its own. What it has is kept: a file or folder of the same name is left as it is, and a .gitignore of its
 * own only gains the editor rules it lacks (nasd treats those as scratch anyway; written down, git agrees).
 */

/** The repository's name as its path or URL gives it: the last component, without `.git`. */
export function repositoryName(source: string): string {
  const last = source.replace(/[?#].*$/, '').replace(/\/+$/, '').split(/[/:]/).pop() ?? '';
  return last.replace(/\.git$/, '') || source;
}

/** Text a README's first paragraph may run to in AGENTS.md (its rules budget is 4 KiB). */
const PARAGRAPH_MAX = 600;

/**
 * A README's first paragraph: the first run of prose lines, after any title, badges, images, HTML and rules;
 * null when it has none. Long ones are cut at a word, with an ellipsis.
 */
export function readmeParagraph(text: string): string | null {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const prose = (l: string) => !/^\s*(#|<|!\[|\[!\[|\[[^\]]*\]:|[=\-*_~`]{3,}\s*$|\.\. |:\w+:)/.test(l);
  const underlined = (at: number) => lines[at].trim() !== '' && /^\s*[=\-]{3,}\s*$/.test(lines[at + 1] ?? '');
  let i = 0;
  // Up to the first prose line: blank lines, titles (`#`, or underlined), badges, images, HTML, rules.
  while (i < lines.length && (lines[i].trim() === '' || !prose(lines[i]) || underlined(i))) i += underlined(i) ? 2 : 1;
  const para: string[] = [];
  for (; i < lines.length && lines[i].trim() !== '' && prose(lines[i]) && !underlined(i); i++) para.push(lines[i].trim());
  let out = para.join(' ').replace(/\s+/g, ' ').trim();
  if (!out) return null;
  if (out.length > PARAGRAPH_MAX) out = `${out.slice(0, PARAGRAPH_MAX).replace(/\s+\S*$/, '')} …`;
  return out;
}

/** The README at the top of a tree (README.md first, then any README*), as text; null when there is none. */
export async function readmeOf(store: Store, tree: string): Promise<string | null> {
  const names = [...(await store.readTree(tree))].filter(([n, e]) => /^readme(\.[a-z]+)?$/i.test(n) && (e.mode === MODE.file || e.mode === MODE.exec));
  names.sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : 1));
  return names.length > 0 ? (await store.readBlob(names[0][1].oid)).toString() : null;
}
const rank = (name: string) => (/\.md$/i.test(name) ? 0 : /\.(markdown|txt|rst)$/i.test(name) || !name.includes('.') ? 1 : 2);

/** Editor rules a .gitignore of the repository's own gains, with their heading. */
const EDITOR_RULES = [...BUILT_IN_IGNORE.split('\n'), '.DS_Store'];

/**
 * The template's files a tree lacks, as entries to add: a file whose path (or any folder above it) the tree
 * holds already is left out, and so is a folder's README where the tree has that folder (the folder is there).
 * AGENTS.md, memory/MEMORY.md and the CLAUDE.md link go in wherever their own path is free.
 */
export async function layoutToAdd(store: Store, tree: string, template: TemplateFile[]): Promise<Map<string, Entry>> {
  const out = new Map<string, Entry>();
  const has = async (path: string) => (await store.lookupPath(tree, path)) !== null;
  for (const f of template) {
    if (f.path.startsWith('.nas/')) continue;
    if (f.path === '.gitignore') {
      const own = await store.lookupPath(tree, '.gitignore');
      if (!own) out.set(f.path, { oid: await store.writeBlob(f.content), mode: MODE.file });
      else if (own.mode === MODE.file || own.mode === MODE.exec) {
        const text = (await store.readBlob(own.oid)).toString();
        const lines = new Set(text.split(/\r?\n/).map((l) => l.trim()));
        const missing = EDITOR_RULES.filter((r) => !lines.has(r));
        if (missing.length === 0) continue;
        const added = `${text === '' || text.endsWith('\n') ? '' : '\n'}\n# editor swap, probe, backup and lock files (added by nas home adopt: nasd treats these as scratch anyway)\n${missing.join('\n')}\n`;
        out.set(f.path, { oid: await store.writeBlob(text + added), mode: own.mode });
      }
      continue;
    }
    const dir = posix.dirname(f.path);
    const isFolderReadme = dir !== '.' && posix.basename(f.path) === 'README.md';
    if (await has(f.path)) continue;
    if (await blocked(store, tree, f.path)) continue;
    if (isFolderReadme && (await has(dir))) continue;
    out.set(f.path, { oid: await store.writeBlob(f.content), mode: f.kind === 'symlink' ? MODE.link : f.kind === 'exec' ? MODE.exec : MODE.file });
  }
  return out;
}

/** Whether a folder above path is something else in the tree (a file or link where the template has a folder). */
async function blocked(store: Store, tree: string, path: string): Promise<boolean> {
  const parts = path.split('/');
  for (let i = 1; i < parts.length; i++) {
    const e = await store.lookupPath(tree, parts.slice(0, i).join('/'));
    if (!e) return false;
    if (e.mode !== MODE.tree) return true;
  }
  return false;
}
