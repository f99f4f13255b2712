import { checkQuota } from '../../policy/policy.js';
import type { ErrnoCode } from '../../util/errors.js';
import type { Space } from './space.js';

/**
 * The bytes a branch adds: every file it holds in its own layer (the upper directory: what it created, wrote,
 * copied up from main, restored, renamed into place), each at its size now; what it only shows from main counts
 * nothing, and so does what it deleted. Kept as one size per path, so an operation sets the sizes of the paths
 * it touches (never adds or subtracts a difference it worked out itself): the total is the sum of sizes, which
 * cannot go below 0 or drift, whatever order operations and open descriptors come in.
 *
 * Held to `limit` (the branch's quota, or a write lease's budget when lower) and to the Home's pool: a change
 * that grows a path is checked against what it would leave, and refused (EDQUOT) with nothing changed; a
 * change that shrinks one is always taken.
 */
export class BranchUsage {
  private readonly sizes = new Map<string, number>();
  private total = 0;
  /** Room held for writes the binding answers alone (write-grants.ts), counted in the total until they are settled. */
  private held = 0;
  /**
   * Gives back the room held for the binding's writes, with what they wrote counted (write-grants.ts): asked
   * before a change is refused (here, or in any branch of the Home), so that room held and not used never
   * refuses a write that fits.
   */
  private reclaim?: () => void;

  constructor(private bound: number, private readonly pool?: Space) {}

  /** The branch's quota, or a write lease's budget when lower. */
  get limit(): number {
    return this.bound;
  }

  /** A lower limit takes back the room held under the old one (it may not fit under the new one). */
  set limit(bytes: number) {
    const lower = bytes < this.bound;
    this.bound = bytes;
    if (lower && this.held > 0) this.reclaim?.();
  }

  /** Bytes the branch holds in its files (not the room held for writes under way). */
  get used(): number {
    return this.total - this.held;
  }

  /** How room held for the binding's writes is given back (write-grants.ts). */
  reclaimWith(reclaim: () => void): void {
    this.reclaim = reclaim;
    this.pool?.reclaimWith(reclaim, true);
  }

  /** Bytes that may still be added: under the branch's limit and the Home's pool. */
  get room(): number {
    const pool = this.pool ? this.pool.free : Infinity;
    return Math.max(0, Math.min(this.limit - this.total, pool));
  }

  /** Hold `bytes` of room for writes counted later (never more than there is: the caller asked `room`). */
  hold(bytes: number): void {
    this.held += bytes;
    this.moved(bytes, true);
  }

  /** Give back room held (at most what is held: a branch released meanwhile holds none). */
  unhold(bytes: number): void {
    const back = Math.min(bytes, this.held);
    this.held -= back;
    this.moved(-back, true);
  }

  /** The size counted for rel (0: the branch holds no file there). */
  sizeOf(rel: string): number {
    return this.sizes.get(rel) ?? 0;
  }

  /** EDQUOT when rel at `size` bytes would take the branch past its limit or the Home past its pool, else null. */
  refusal(rel: string, size: number): ErrnoCode | null {
    const refused = () => {
      const growth = size - this.sizeOf(rel);
      return checkQuota(this.total, growth, this.limit) ?? this.pool?.refusal(growth) ?? null;
    };
    if (!refused() || this.held === 0 || !this.reclaim) return refused();
    this.reclaim();
    return refused();
  }

  /**
   * The file at rel is to be `size` bytes (made, copied up, truncated, written over whole): refused with
   * nothing changed when that growth does not fit, else counted at once, before the bytes are written, so that
   * two changes under way together cannot both take the same room.
   */
  resize(rel: string, size: number): ErrnoCode | null {
    const refusal = this.refusal(rel, size);
    if (!refusal) this.set(rel, size);
    return refusal;
  }

  /** A write that reaches `end`: the file becomes that long if it was shorter (checked as resize is). */
  grow(rel: string, end: number): ErrnoCode | null {
    return this.resize(rel, Math.max(this.sizeOf(rel), end));
  }

  /**
   * rel is `size` bytes on disk, whatever the limit (recovery counting what is there; a change that failed half
   * way counted again as it left the file; null: no file there).
   */
  set(rel: string, size: number | null): void {
    const before = this.sizeOf(rel);
    if (size === null) this.sizes.delete(rel);
    else this.sizes.set(rel, size);
    this.moved((size ?? 0) - before);
  }

  /** rel is gone (unlinked, parked for the recycle area, dropped for main's copy); `dir`: with all below it. */
  removed(rel: string, dir = false): void {
    this.set(rel, null);
    if (dir) for (const p of this.below(rel)) this.set(p, null);
  }

  /** rel was renamed to `to` (a directory with all below it): what was counted at `to` is replaced. */
  renamed(from: string, to: string, dir = false): void {
    if (from === to) return;
    const moving: [string, number][] = [];
    const own = this.sizes.get(from);
    if (own !== undefined) moving.push([to, own]);
    if (dir) for (const p of this.below(from)) moving.push([to + p.slice(from.length), this.sizeOf(p)]);
    this.removed(from, dir);
    this.removed(to, dir);
    for (const [p, size] of moving) this.set(p, size);
  }

  /** The branch goes away (closed, discarded): its bytes go back to the Home's pool. */
  release(): void {
    this.unhold(this.held);
    this.moved(-this.total);
    this.sizes.clear();
    if (this.reclaim) this.pool?.reclaimWith(this.reclaim, false);
  }

  private below(rel: string): string[] {
    const prefix = `${rel}/`;
    return [...this.sizes.keys()].filter((p) => p.startsWith(prefix));
  }

  private moved(delta: number, held = false): void {
    if (delta === 0) return;
    this.total += delta;
    this.pool?.add(delta, held);
  }
}

/** The rest of an EDQUOT message: what the branch holds against its limit, and what to do. */
export function overQuota(usage: BranchUsage): string {
  return `would take the branch past its quota: it holds ${usage.used} of ${usage.limit} bytes (branch_quota_bytes in .nas/limits.yaml, ` +
    `or the write lease's --budget when lower; all the Home's branches together are held to home_quota_bytes): delete or shorten files in the branch, or raise the limit`;
}
