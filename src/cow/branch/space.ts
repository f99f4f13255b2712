import { checkQuota } from '../../policy/policy.js';
import type { ErrnoCode } from '../../util/errors.js';

/**
 * A Home's pool: the bytes all of its branches hold together (each branch's usage.ts passes on every change
 * of its own total), against the Home-level quota.
 */
export class Space {
  private bytes = 0;

  constructor(public limit: number) {}

  get used(): number {
    return this.bytes;
  }

  /** A branch's total changed by `bytes` (negative: it holds fewer). */
  add(bytes: number): void {
    this.bytes += bytes;
  }

  /** EDQUOT when growing by `growth` bytes would pass the Home's quota, else null. */
  refusal(growth: number): ErrnoCode | null {
    return checkQuota(this.bytes, growth, this.limit);
  }
}
