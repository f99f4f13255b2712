import { checkQuota } from '../../policy/policy.js';
import type { ErrnoCode } from '../../util/errors.js';

/**
 * Bytes a branch holds in its upper directory, against its quota (the lease's budget can lower it) and,
 * when the branch has one, its Home's pool: the Home-level quota across all of its branches.
 */
export class Space {
  private bytes = 0;

  constructor(public limit: number, private readonly pool?: Space) {}

  get used(): number {
    return this.bytes;
  }

  /** Bytes came into the upper directory (a negative count: bytes left it). Passed on to the Home's pool, so the pool always holds the sum of its branches. */
  add(bytes: number): void {
    this.bytes += bytes;
    this.pool?.add(bytes);
  }

  /** Bytes left the upper directory (a file removed, truncated or replaced). */
  remove(bytes: number): void {
    this.add(-bytes);
  }

  /** EDQUOT when growing by `growth` bytes would pass the branch's quota or the Home's, else null. */
  refusal(growth: number): ErrnoCode | null {
    return checkQuota(this.bytes, growth, this.limit) ?? this.pool?.refusal(growth) ?? null;
  }

  /** A branch going away gives its bytes back to the pool. */
  release(): void {
    this.remove(this.bytes);
  }
}
