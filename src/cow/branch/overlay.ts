import fs from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { fsError, hasCode } from '../../util/errors.js';
import { MODE, type Entry } from '../../store/store.js';
import { checkMutation, isScratch, type Mutation, type Rules } from '../../policy/policy.js';
import type { GitLayer } from '../git-layer.js';

/** A path as the view sees it: in the upper directory (stat) or only in git (entry). */
export type Node = { stat: Stats; entry?: undefined } | { entry: Entry; stat?: undefined };

export const isDir = (n: Node): boolean => (n.stat ? n.stat.isDirectory() : n.entry.mode === MODE.tree);
export const join = (dir: string, name: string): string => (dir === '' ? name : `${dir}/${name}`);
export const parentOf = (rel: string): string => rel.slice(0, Math.max(0, rel.lastIndexOf('/')));

/**
 * libfuse 2 keeps an unlinked file that is still open by renaming it to `.fuse_hidden<n>` and unlinks that
 * name at the last close. Such names are the deleted file's last moments: never committed, never filed.
 */
export const isFuseHidden = (rel: string): boolean => rel.slice(rel.lastIndexOf('/') + 1).startsWith('.fuse_hidden');

/**
 * The layered namespace of a branch: the upper directory wins; git's tree shows through unless a whiteout
 * hides it; scratch paths exist only in the upper directory. Knows nothing of commits or the recycle area.
 */
export class Overlay {
  /** Paths hidden from git, with the generation that hid them (a commit forgets only what it saw). */
  readonly whiteouts = new Map<string, number>();
  private gen = 0;

  constructor(readonly upper: string, readonly rules: Rules, public layer: GitLayer) {}

  /** A fresh generation number: changes are forgotten after a commit only if none came after. */
  next(): number {
    return ++this.gen;
  }

  up(rel: string): string {
    return rel === '' ? this.upper : `${this.upper}/${rel}`;
  }

  scratch(rel: string): boolean {
    return isScratch(this.rules, rel);
  }

  /** Policy's answer for a mutation of rel, as an FsError. */
  check(op: Mutation, rel: string, exists = false): void {
    const code = checkMutation('branch', this.rules, op, rel, exists);
    if (code) throw fsError(code, `${op} ${rel}: refused by policy`);
  }

  hide(path: string): void {
    this.whiteouts.set(path, this.next());
  }

  /** Whether git's version of rel is hidden: rel or one of its ancestors was deleted in this branch. */
  hidden(rel: string): boolean {
    if (this.whiteouts.size === 0) return false;
    for (let p = rel; p !== ''; p = parentOf(p)) if (this.whiteouts.has(p)) return true;
    return false;
  }

  async resolve(rel: string): Promise<Node | null> {
    try {
      return { stat: await fs.lstat(this.up(rel)) };
    } catch (e) {
      if (!hasCode(e, 'ENOENT') && !hasCode(e, 'ENOTDIR')) throw e;
    }
    return this.gitNode(rel);
  }

  async gitNode(rel: string): Promise<Node | null> {
    if (this.scratch(rel) || this.hidden(rel)) return null;
    const entry = await this.layer.lookup(rel);
    return entry ? { entry } : null;
  }

  async need(rel: string): Promise<Node> {
    const node = await this.resolve(rel);
    if (!node) throw fsError('ENOENT');
    return node;
  }

  /** A directory's merged listing: upper names plus git's names that are neither hidden nor scratch. */
  async names(rel: string): Promise<string[]> {
    const node = await this.need(rel);
    if (!isDir(node)) throw fsError('ENOTDIR');
    const names = new Set<string>(node.stat ? await fs.readdir(this.up(rel)) : []);
    const git = node.entry ?? (await this.gitNode(rel))?.entry;
    if (git && git.mode === MODE.tree) {
      for (const name of await this.layer.names(git)) {
        const child = join(rel, name);
        if (!this.whiteouts.has(child) && !this.scratch(child)) names.add(name);
      }
    }
    return [...names];
  }

  /** Visit everything below rel in the upper directory (rel itself excluded). */
  async walkUpper(rel: string, visit: (rel: string, st: Stats) => unknown): Promise<void> {
    let names: string[];
    try {
      names = await fs.readdir(this.up(rel));
    } catch (e) {
      if (hasCode(e, 'ENOENT') || hasCode(e, 'ENOTDIR')) return;
      throw e;
    }
    for (const name of names) {
      const child = join(rel, name);
      const st = await fs.lstat(this.up(child));
      visit(child, st);
      if (st.isDirectory()) await this.walkUpper(child, visit);
    }
  }
}
