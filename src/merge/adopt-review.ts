import { MODE, type Entry, type Identity, type Store } from '../store/store.js';
import { parseCheckDefinitions } from './checks.js';
import type { TemplateFile } from '../home/template.js';

/**
 * What an adopted repository brings that would take effect without review: its own `.nas/` (the Home's policy,
 * limits, checks...) and the executables its `.nas/checks.yaml` names (checks run them on every PR). Main keeps
 * the repository's every commit, and nasd's one commit on top sets `.nas/` to the built-in template's and takes
 * those executables out; the repository's own come back through the adopt PR, which waits for the owner.
 */

/** The paths of a repository's tree that wait for review, with their entries: `.nas` and the executables its checks name. */
export async function heldForReview(store: Store, tree: string): Promise<Map<string, Entry>> {
  const held = new Map<string, Entry>();
  const nas = await store.lookupPath(tree, '.nas');
  if (!nas) return held;
  held.set('.nas', nas);
  // Looked up as a check would (checks.ts): the same path, in the same tree.
  const checks = await store.lookupPath(tree, '.nas/checks.yaml');
  if (!checks || checks.mode === MODE.tree) return held;
  for (const check of parseCheckDefinitions((await store.readBlob(checks.oid)).toString()).checks) {
    if (check.run === '.nas' || check.run.startsWith('.nas/')) continue;
    const exe = await store.lookupPath(tree, check.run);
    if (exe && exe.mode !== MODE.tree) held.set(check.run, exe);
  }
  return held;
}

/**
 * Move `ref` from the repository's `head` to one commit by nasd whose tree is the repository's with the
 * template's `.nas/` in place of what waits for review: what the Home runs with until the owner approves.
 * Returns main's head (`head` itself when that changes nothing).
 */
export async function holdForReview(store: Store, ref: string, head: string, template: TemplateFile[], author: Identity): Promise<string> {
  const tree = (await store.readCommit(head)).tree;
  const held = await heldForReview(store, tree);
  const changes = new Map<string, Entry | null>([...held.keys()].map((path) => [path, null]));
  for (const f of template.filter((t) => t.path.startsWith('.nas/'))) changes.set(f.path, { oid: await store.writeBlob(f.content), mode: modeOf(f) });
  const next = await store.editTree(tree, changes);
  if (next === tree) return head;
  const executables = [...held.keys()].filter((p) => p !== '.nas');
  const message = held.size === 0 ? 'nas: adopt: the Home\'s .nas/ from the built-in template (the repository has none of its own)\n'
    : 'nas: adopt: main runs with the built-in template\'s .nas/ until the owner approves the adopt PR\n\n' +
      `The repository's own .nas/${executables.length > 0 ? ` and the executables its checks name (${executables.join(', ')})` : ''} wait in that PR.\n`;
  return store.commitTree(ref, { head, tree: next, message, author });
}

/** What the adopt PR restores on top of main: every file of what the repository's tree holds for review. */
export async function restoredForReview(store: Store, tree: string): Promise<Map<string, Entry>> {
  const out = new Map<string, Entry>();
  for (const [path, entry] of await heldForReview(store, tree)) {
    if (entry.mode !== MODE.tree) out.set(path, entry);
    else for (const [below, e] of await filesBelow(store, entry.oid, path)) out.set(below, e);
  }
  return out;
}

/** Every entry other than a folder below a tree, by its path under `prefix`. */
async function filesBelow(store: Store, oid: string, prefix: string): Promise<[string, Entry][]> {
  const out: [string, Entry][] = [];
  for (const [name, entry] of await store.readTree(oid)) {
    const path = `${prefix}/${name}`;
    if (entry.mode === MODE.tree) out.push(...(await filesBelow(store, entry.oid, path)));
    else out.push([path, entry]);
  }
  return out;
}

const modeOf = (f: TemplateFile): number => (f.kind === 'symlink' ? MODE.link : f.kind === 'exec' ? MODE.exec : MODE.file);
