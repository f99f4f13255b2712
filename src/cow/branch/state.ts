import { fsError } from '../../util/errors.js';
import type { WriteHandle } from '../view.js';
import { parentOf } from './paths.js';
import type { Space } from './space.js';
import { BranchUsage } from './usage.js';

/** Changes as a commit takes them: each path with the generation that marked it. */
export type Marked = [path: string, generation: number][];

/**
 * What a branch view knows of itself between two calls, owned by the view and asked through these methods
 * by its parts (overlay, copy-up, deletions, names, committer, open files), none of which holds another's
 * fields: the files open for writing, the dirty paths and the whiteouts not committed yet, whether the
 * branch has expired, and the bytes the branch holds (usage.ts).
 */
export class BranchState {
  /** The bytes the branch holds, per path, against the quota (or the lease's budget) and the Home's pool. */
  readonly usage: BranchUsage;
  /** Versioned paths whose upper content is not committed yet, with the generation that marked them. */
  private readonly dirty = new Map<string, number>();
  /** Paths hidden from git, with the generation that hid them (a commit forgets only what it saw). */
  private readonly whiteouts = new Map<string, number>();
  private generation = 0;
  /** Handles open for writing, so that a sync can include what they wrote before their release arrives. */
  private readonly writers = new Set<WriteHandle>();
  /** Why the branch takes no more changes (its TTL passed), once it does not. */
  private closedBecause?: string;
  /** Why the branch is gone (discarded): what is still open in it is dead, so no write is taken and then dropped. */
  private goneBecause?: string;
  /**
   * Files a create made here that no commit has taken yet (never a copy-up or a rename of something older):
   * deleted young, they file nothing in the recycle area (names.ts transient). Kept in memory: after a restart
   * nothing counts as made, and every deletion is filed.
   */
  readonly made = new Set<string>();

  constructor(quotaBytes: number, homeSpace?: Space) {
    this.usage = new BranchUsage(quotaBytes, homeSpace);
  }

  // ---- dirty paths and whiteouts -----------------------------------------------------------------

  /** A versioned path changed in the upper directory: the next commit takes it. */
  markDirty(rel: string): void {
    this.dirty.set(rel, ++this.generation);
  }

  isDirty(rel: string): boolean {
    return this.dirty.has(rel);
  }

  /** rel is gone (deleted, or renamed with what is below it when `below`): nothing of it is committed from the upper directory. */
  forget(rel: string, below = false): void {
    this.dirty.delete(rel);
    if (below) for (const p of [...this.dirty.keys()]) if (p.startsWith(`${rel}/`)) this.dirty.delete(p);
  }

  /** Hide git's copy of path (and of all below it). */
  hide(path: string): void {
    this.whiteouts.set(path, ++this.generation);
  }

  /** Whether git's version of rel is hidden: rel or one of its ancestors was deleted in this branch. */
  hidden(rel: string): boolean {
    if (this.whiteouts.size === 0) return false;
    for (let p = rel; p !== ''; p = parentOf(p)) if (this.whiteouts.has(p)) return true;
    return false;
  }

  /** Whether path itself was hidden (a listing leaves out git's names hidden this way). */
  isWhiteout(path: string): boolean {
    return this.whiteouts.has(path);
  }

  whiteoutPaths(): string[] {
    return [...this.whiteouts.keys()];
  }

  /** Dirty paths and whiteouts not committed yet. */
  get pending(): number {
    return this.dirty.size + this.whiteouts.size;
  }

  get dirtyCount(): number {
    return this.dirty.size;
  }

  /** What a commit starts from: the dirty paths and the whiteouts as they are now. */
  taken(): { dirty: Marked; whiteouts: Marked } {
    return { dirty: [...this.dirty], whiteouts: [...this.whiteouts] };
  }

  /** After a commit of `taken`: forget what it committed, unless it changed again while the commit was made. */
  committed(taken: { dirty: Marked; whiteouts: Marked }): void {
    for (const [p, g] of taken.dirty) {
      this.made.delete(p);
      if (this.dirty.get(p) === g) this.dirty.delete(p);
    }
    for (const [p, g] of taken.whiteouts) if (this.whiteouts.get(p) === g) this.whiteouts.delete(p);
  }

  // ---- files open for writing --------------------------------------------------------------------

  opened(h: WriteHandle): void {
    this.writers.add(h);
  }

  closed(h: WriteHandle): void {
    this.writers.delete(h);
  }

  /** Every file open for writing. */
  openWriters(): WriteHandle[] {
    return [...this.writers];
  }

  /** Whether a process has rel open for writing. */
  isOpenForWriting(rel: string): boolean {
    for (const h of this.writers) if (h.rel === rel) return true;
    return false;
  }

  /** The files open for writing at rel, or below it when `below` (a directory renamed). */
  writersAt(rel: string, below = false): WriteHandle[] {
    return [...this.writers].filter((h) => h.rel === rel || (below && h.rel.startsWith(`${rel}/`)));
  }

  // ---- expiry ------------------------------------------------------------------------------------

  /** The branch's TTL passed: from now on every change is EROFS, `why` its message. */
  expire(why: string): void {
    this.closedBecause = why;
  }

  /** The owner extended an expired branch's TTL: it takes changes again. */
  reopen(): void {
    this.closedBecause = undefined;
  }

  /** The branch is being discarded (discard). */
  get gone(): boolean {
    return this.goneBecause !== undefined;
  }

  get expired(): boolean {
    return this.closedBecause !== undefined;
  }

  // ---- discard -----------------------------------------------------------------------------------

  /** The branch is being discarded: from now on a write or fsync through a descriptor still open in it is EIO (null: it stays). */
  discard(why: string | null): void {
    this.goneBecause = why ?? undefined;
  }

  /** EIO once the branch is discarded: the bytes would go nowhere, and a success would say they were kept. */
  refuseIfGone(): void {
    if (this.goneBecause) throw fsError('EIO', this.goneBecause);
  }

  /** EROFS once the branch has expired. */
  refuseIfExpired(): void {
    if (this.closedBecause) throw fsError('EROFS', this.closedBecause);
  }
}
