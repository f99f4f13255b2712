import fs from 'node:fs/promises';
import type { BigIntStats, Stats } from 'node:fs';
import { fsError, hasCode } from '../../util/errors.js';
import { MODE, type Entry } from '../../store/store.js';
import { decideMutation, isProtected, isScratch, type Mutation, type Rules } from '../../policy/policy.js';
import type { GitLayer } from '../git-layer.js';
import { IgnoreRules } from './ignore-rules.js';
import { Beneath } from '../../util/beneath.js';
import * as fsx from '../fsx.js';
import { join } from './paths.js';
import type { BranchState } from './state.js';

/** Linux's limit on a path given to a syscall, its final NUL included. */
const PATH_MAX = 4096;

/** A path as the view sees it: in the upper directory (stat) or only in git (entry). */
export type Node = { stat: Stats; entry?: undefined } | { entry: Entry; stat?: undefined };

export const isDir = (n: Node): boolean => (n.stat ? n.stat.isDirectory() : n.entry.mode === MODE.tree);

/** What the overlay asks of the branch's state: which paths are hidden from git, and whether changes are still taken. */
export type OverlayState = Pick<BranchState, 'hidden' | 'isWhiteout' | 'refuseIfExpired'>;

/**
 * The layered namespace of a branch: the upper directory wins; git's tree shows through unless a whiteout
 * hides it; scratch paths exist only in the upper directory. Knows nothing of commits or the recycle area:
 * the whiteouts and the expiry are the branch state's (state.ts), asked here.
 */
export class Overlay {
  /** The branch's .gitignore files: what they match (and git does not track) is scratch too. */
  readonly ignore: IgnoreRules;

  /**
   * `upper` is the upper directory; `short` names the same directory through a descriptor held open on it
   * (/proc/<pid>/fd/<n>), for paths that would pass PATH_MAX behind the Store's own location: the
   * daemon's prefix then costs a few bytes, so paths near PATH_MAX work as on the disk underneath.
   * Children (git, mknod) can use such a path too: it names this process, not themselves.
   * `onIgnoreChange` is called when .gitignore rules may have changed.
   */
  constructor(
    readonly upper: string,
    private readonly short: string,
    readonly rules: Rules,
    private head: GitLayer,
    private readonly state: OverlayState,
    onIgnoreChange: () => void,
  ) {
    this.tree = new Beneath(upper);
    this.ignore = new IgnoreRules((rel) => this.text(rel), onIgnoreChange);
  }

  /** The upper directory for changes by name that no kernel lookup resolved first (see Beneath). */
  readonly tree: Beneath;

  /** The branch's head commit in git, what shows through the upper directory. */
  get layer(): GitLayer {
    return this.head;
  }

  /** Point the view at a new head commit (after a commit of the branch). */
  setHead(layer: GitLayer): void {
    this.head = layer;
  }

  up(rel: string): string {
    if (rel === '') return this.upper;
    return Buffer.byteLength(this.upper) + Buffer.byteLength(rel) + 1 < PATH_MAX ? `${this.upper}/${rel}` : `${this.short}/${rel}`;
  }

  /** Scratch by retention class (workspace/): never in git, whatever git holds. */
  scratch(rel: string): boolean {
    return isScratch(this.rules, rel);
  }

  /**
   * Scratch for this branch: by retention class, or ignored by a .gitignore and not tracked (git keeps
   * committing a tracked file whatever .gitignore says). Never committed, merged or recycled.
   */
  async scratchAt(rel: string, directory = false): Promise<boolean> {
    if (this.scratch(rel)) return true;
    if (isProtected(this.rules, rel)) return false;
    if (!(await this.ignore.ignored(rel, directory))) return false;
    return (await this.layer.lookup(rel)) === null;
  }

  /** Policy's answer for a mutation of rel, as an FsError (EROFS first once the branch has expired). */
  async check(op: Mutation, rel: string, exists = false): Promise<void> {
    this.state.refuseIfExpired();
    let no = decideMutation('branch', this.rules, op, rel, exists);
    // What git cannot hold (.git, hard links, special files) may live where git ignores: ask again only then.
    if (no?.code === 'EPERM' && !this.scratch(rel) && (await this.scratchAt(rel))) no = decideMutation('branch', this.rules, op, rel, exists, true);
    if (no) throw fsError(no.code, `${op} ${rel} refused: ${no.why}`);
  }

  /**
   * rel's own entry in the upper directory, looked at by name in its parent held open (a link on the way is
   * ELOOP, never followed: it could lead into the mount, which this thread serves).
   */
  private lstatUpper<S>(rel: string, lstat: (path: string) => Promise<S>): Promise<S> {
    return rel === '' ? lstat(this.upper) : this.tree.at(rel, lstat);
  }

  /** The upper directory's entry for rel with nanosecond times, or null when rel is not there. */
  async statNs(rel: string): Promise<BigIntStats | null> {
    try {
      return await this.lstatUpper(rel, fsx.lstatNs);
    } catch (e) {
      if (!hasCode(e, 'ENOENT') && !hasCode(e, 'ENOTDIR') && !hasCode(e, 'ELOOP')) throw e;
      return null;
    }
  }

  async resolve(rel: string): Promise<Node | null> {
    try {
      return { stat: await this.lstatUpper(rel, fsx.lstat) };
    } catch (e) {
      if (!hasCode(e, 'ENOENT') && !hasCode(e, 'ENOTDIR') && !hasCode(e, 'ELOOP')) throw e;
    }
    return this.gitNode(rel);
  }

  async gitNode(rel: string): Promise<Node | null> {
    if (this.scratch(rel) || this.state.hidden(rel)) return null;
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
        if (!this.state.isWhiteout(child) && !this.scratch(child)) names.add(name);
      }
    }
    return [...names];
  }

  /** A regular file's text as the view shows it, or null. */
  private async text(rel: string): Promise<string | null> {
    const node = await this.resolve(rel);
    if (!node) return null;
    if (node.stat) return node.stat.isFile() ? (await this.tree.readFile(rel)).toString() : null;
    if (node.entry.mode !== MODE.file && node.entry.mode !== MODE.exec) return null;
    return (await this.layer.content(node.entry)).toString();
  }

  /**
   * Visit everything below rel in the upper directory (rel itself excluded), descending into the directories
   * `descend` allows. A name that is gone by the time it is looked at (or that Node cannot name: not UTF-8) is
   * passed over.
   */
  async walkUpper(rel: string, visit: (rel: string, st: Stats) => unknown, descend: (rel: string) => boolean = () => true): Promise<void> {
    // Users change workspace/ on the disk itself: walked through descriptors, never through a swapped-in link.
    await this.tree.walk(rel, visit, descend);
  }

}
