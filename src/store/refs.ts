/**
 * Every ref name a Home's Store uses, in one place. Branches are plain git branches so that `git clone`
 * and `git log` work; everything else Agent NAS keeps lives under refs/nas/ as plain-text commits.
 */

/** The protected main line: changed only by a merge. */
export const MAIN_REF = 'refs/heads/main';
export const BRANCH_PREFIX = 'refs/heads/';
/** Each branch's record (`<branch>.yaml`: from, base, created, ttl, expires, run). */
export const BRANCHES_REF = 'refs/nas/branches';
/** The recycle area: `<day>/<id>/record.yaml` and `<day>/<id>/content`. */
export const TRASH_REF = 'refs/nas/trash';
/** Leases (`<id>.yaml`); tokens are never stored, only their hashes. */
export const LEASES_REF = 'refs/nas/leases';
/** Agent PRs: `<id>/pr.yaml` and `<id>/reads.txt`. */
export const PRS_REF = 'refs/nas/prs';
/** Runs (`nas run`): `<id>.yaml`, each run's command, user, branch, state and PR. */
export const RUNS_REF = 'refs/nas/runs';

export const branchRef = (branch: string): string => `${BRANCH_PREFIX}${branch}`;
/** Keeps a proposed commit alive whatever its branch does later. */
export const prHeadRef = (id: number): string => `refs/nas/pr-heads/${id}`;
/** Checkpoints: a named, immutable ref each, and their records (`<name>.yaml`: commit, branch, who, when, message). */
export const checkpointRef = (name: string): string => `refs/nas/checkpoints/${name}`;
export const CHECKPOINT_RECORDS_REF = 'refs/nas/checkpoint-records';
/** The Home's place in its life (`home.yaml`): retired and by which successor, or which Home it succeeds. */
export const LIFECYCLE_REF = 'refs/nas/lifecycle';
