import { checkQuota } from '../../policy/policy.js';
import type { ErrnoCode } from '../../util/errors.js';

/** Bytes a branch holds in its upper directory, against its quota (the lease's budget can lower it). */
export class Space {
  used = 0;

  constructor(public limit: number) {}

  /** EDQUOT when growing by `growth` bytes would pass the quota, else null. */
  refusal(growth: number): ErrnoCode | null {
    return checkQuota(this.used, growth, this.limit);
  }
}
