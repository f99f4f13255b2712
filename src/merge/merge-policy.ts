/**
 * Whether an Agent PR merges by itself or waits at the Human Gate (SPEC.md, Agent Branch, requirement 4;
 * the "honest limits": low-risk changes merge automatically). Pure: the facts in, the decision and every
 * reason out. Failed checks fail the PR; anything risky waits for the owner.
 */

export interface MergeFacts {
  /** From main's .nas/policy.yaml. */
  auto: boolean;
  /** Problems reading main's policy: then nothing merges by itself. */
  policyProblems: string[];
  checks: { name: string; ok: boolean }[];
  deleted: string[];
  /** Changed paths under .nas/. */
  metadata: string[];
  /** Notes the branch claims are reviewed (any `trust: reviewed` it changed). */
  reviewedClaims: string[];
  /** Paths under inbox/ the run read (untrusted input). */
  inboxReads: string[];
  /** Changed auto-loaded context: AGENTS.md, the start set, skills (memory/start-set.ts). */
  startSet: string[];
  /** Files main changed too that no registered driver merges (structured data, or a `person` rule). */
  needsPerson: string[];
  /** Paths that became setuid, setgid or world-writable (mode-risk.ts), each with its modes. */
  modeRisks: string[];
  /** How the run's command ended when it did not succeed (`3`, `SIGTERM`): its work may be unfinished. */
  failedRun?: string;
  /** The run had the host's network (its lease's egress scope) and main's policy sets merge.egress: person. */
  egressToPerson?: boolean;
}

/** A run's exit status (`0`, `3`, `SIGTERM`) that says its command did not succeed. */
export const runFailed = (exit: string | undefined): boolean => exit !== undefined && exit !== '' && exit !== '0';

/** Why a PR of a run that could reach outside the Home waits, when main's policy says a person decides those. */
export const EGRESS_REASON = 'the run had network egress (lease scope egress): a person decides';

export type Decision = { action: 'merge' } | { action: 'wait'; reasons: string[] } | { action: 'fail'; reasons: string[] };

const few = (paths: string[]) => paths.slice(0, 5).join(', ') + (paths.length > 5 ? ` and ${paths.length - 5} more` : '');

export function decide(f: MergeFacts): Decision {
  const failed = f.checks.filter((c) => !c.ok).map((c) => c.name);
  if (failed.length > 0) return { action: 'fail', reasons: [`check(s) failed: ${failed.join(', ')}`] };
  const reasons: string[] = [];
  if (!f.auto) reasons.push('main\'s .nas/policy.yaml sets merge.auto: false');
  if (f.policyProblems.length > 0) reasons.push(`main's .nas/policy.yaml has problems (${f.policyProblems[0]})`);
  if (f.deleted.length > 0) reasons.push(`deletes ${few(f.deleted)}`);
  if (f.metadata.length > 0) reasons.push(`changes Home metadata: ${few(f.metadata)}`);
  if (f.reviewedClaims.length > 0) reasons.push(`marks notes reviewed: ${few(f.reviewedClaims)}`);
  if (f.inboxReads.length > 0) reasons.push(`the run read untrusted input: ${few(f.inboxReads)}`);
  if (f.startSet.length > 0) reasons.push(`changes what agents load at session start: ${few(f.startSet)}`);
  if (f.modeRisks.length > 0) reasons.push(`gives modes a person must see (mode-risk): ${few(f.modeRisks)}`);
  if (f.egressToPerson) reasons.push(EGRESS_REASON);
  if (f.failedRun !== undefined) reasons.push(`the run's command failed (exit ${f.failedRun}): its work may be unfinished`);
  if (f.needsPerson.length > 0) reasons.push(`main changed ${few(f.needsPerson)} too, and no merge driver in .nas/merge.yaml merges it: a person decides`);
  return reasons.length > 0 ? { action: 'wait', reasons } : { action: 'merge' };
}
