import { checkQuota } from '../../policy/policy.js';
import type { ErrnoCode } from '../../util/errors.js';

/**
 * A Home's pool: the bytes all of its branches hold together (each branch's usage.ts passes on every change
 * of its own total), against the Home-level quota.
 */
export class Space {
  private bytes = 0;
  /** Of those, room branches hold for writes under way (usage.ts hold), not yet in files. */
  private holding = 0;
  /** Each branch's way to give back room it holds for writes under way (usage.ts), asked before a refusal. */
  private readonly reclaimers = new Set<() => void>();

  constructor(public limit: number) {}

  /** Bytes the Home's branches hold in files. */
  get used(): number {
    return this.bytes - this.holding;
  }

  /** Bytes that may still be added, beside what is held. */
  get free(): number {
    return this.limit - this.bytes;
  }

  /** A branch's total changed by `bytes` (negative: it holds fewer); `held`: room held for writes, or given back. */
  add(bytes: number, held = false): void {
    this.bytes += bytes;
    if (held) this.holding += bytes;
  }

  /** EDQUOT when growing by `growth` bytes would pass the Home's quota, else null. */
  refusal(growth: number): ErrnoCode | null {
    if (checkQuota(this.bytes, growth, this.limit) === null) return null;
    for (const reclaim of this.reclaimers) reclaim();
    return checkQuota(this.bytes, growth, this.limit);
  }

  /** A branch that may hold room (`on`), or that holds none any more (its usage released). */
  reclaimWith(reclaim: () => void, on: boolean): void {
    if (on) this.reclaimers.add(reclaim);
    else this.reclaimers.delete(reclaim);
  }
}
