import type { BranchRecord, MergedMark } from '../home/home.js';
import type { Mounted } from '../homes/home-set.js';
import type { BranchView } from '../cow/branch/branch-view.js';
import type { LimitsConfig } from '../config/home-config.js';
import type { PullRequest } from '../merge/pr-store.js';
import { parseDuration } from '../util/duration.js';

/**
 * Finished work leaves: a branch whose PR merged is marked so in its record (the PR, when, the head that
 * merged), and removed once the Home's `merged_branch_grace` has passed (a run's branch at once) unless it took
 * writes since; a run's branch that never held any work goes at the run's end. The rules, here; the removal
 * itself is Branches' (workflows/branches.ts).
 */

/** A PR merged: its branch's record says so (nothing to mark when the branch is gone already). */
export async function markMerged(m: Mounted, pr: PullRequest): Promise<void> {
  const record = m.records.get(pr.branch);
  if (pr.state !== 'merged' || !pr.merged || !record) return;
  const marked: BranchRecord = { ...record, merged: { pr: pr.id, at: pr.merged.at, head: pr.head } };
  // Noted before the write, as every change of a record is: a change made meanwhile starts from this one.
  m.records.set(pr.branch, marked);
  await m.home.writeBranchRecord(marked);
}

/** The branch still holds only what merged: its head is the head that merged and nothing is pending. */
export function stillMerged(view: BranchView, mark: MergedMark): boolean {
  return view.head === mark.head && view.pendingChanges === 0;
}

/** A run's branch never held work: no commit beyond where it forked, nothing pending. */
export function neverWritten(view: BranchView, record: BranchRecord): boolean {
  return view.head === record.base && view.pendingChanges === 0;
}

/** How long a merged branch stays (ms): a run's goes at once; null when the Home's setting does not read. */
export function mergedGraceMs(record: BranchRecord, limits: LimitsConfig): number | null {
  if (record.run) return 0;
  try {
    return parseDuration(limits.merged_branch_grace, { allowZero: true }) * 1000;
  } catch {
    return null;
  }
}
