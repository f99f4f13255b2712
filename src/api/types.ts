import type { ObjectCounts } from '../store/types.js';
import type { BranchRecord, MergedMark } from '../home/home.js';
import type { TrashRecord } from '../trash/trash.js';
import type { Lease } from '../lease/lease.js';
import type { Owner } from '../util/owner.js';
import type { PullRequest } from '../merge/pr-store.js';
import type { MetaChange, ShownFolder } from '../merge/shown-diff.js';
import type { CheckReport, Finding } from '../memory/check.js';
import type { Briefing, ContextLists, measure } from '../memory/context.js';
import type { SharedContexts } from '../memory/shared.js';
import type { RunRecord } from '../run/run-store.js';

/**
 * What the control API answers, route by route (see contract.ts). The domain types are imported, not
 * copied: these are only the views the daemon builds around them. Type-only imports, so the CLI loads
 * none of the daemon's modules.
 */

// ---- Homes, branches, sync ------------------------------------------------------------------------

export interface HomeSummary {
  role: string;
  /** The Home's bare repository. */
  store: string;
  /** Main's head commit. */
  main: string;
  branches: string[];
  /** Those of its branches whose work merged into main, removed after the Home's merged_branch_grace (absent: none). */
  merged?: string[];
  /** What could not be read in its `.nas/` files (defaults stand in). */
  problems: string[];
  /** active: served; retired: served read-mostly (no new branches), see successor; archived: kept, not mounted. */
  state: 'active' | 'retired' | 'archived';
  successor?: string;
  predecessor?: string;
}

/**
 * Where the views are mounted and nasd keeps its state (the owner's token is there); nasd's pid; where Prometheus
 * scrapes it, if it does; when this process started (a reload starts anew); `waiting`: PRs waiting for a person;
 * `problems`: what an operator should act on, each naming the command that shows more.
 */
export interface StatusReport {
  mount: string;
  state_dir: string;
  pid: number;
  metrics?: string;
  version: string;
  started: string;
  homes: (HomeSummary & { waiting: number })[];
  problems: string[];
}

export interface BranchCreated extends BranchRecord {
  home: string;
  /** Its name under the mount root: `<role>@<branch>`. */
  view: string;
  createdInMs: number;
}

export interface BranchExtended extends BranchRecord {
  view: string;
  /** It had expired and takes writes again. */
  reopened: boolean;
}

export interface BranchListing extends BranchRecord {
  /** Absent when the branch has a record but no open view. */
  head?: string;
  /** Its TTL passed: read-only until its grace period ends and it is removed. */
  expired: boolean;
  /** Its PR merged and it holds nothing more: removed after the Home's merged_branch_grace (absent once written again). */
  merged?: MergedMark;
  /** Changes written but not committed yet. */
  pending: number;
  quota?: { used: number; limit: number };
  /** Bytes in the branch's upper directory by class: scratch (workspace/, ignored paths) and versioned. */
  bytes?: { scratch: number; versioned: number };
  /** In a cluster, the host that holds it when that is another: shown here read-only at its last pushed head. */
  host?: string;
}

export type { BranchResolved, BranchUpdated } from './branch-update.js';

/** View name -> its head commit after the sync. */
export type SyncResult = Record<string, string>;

export interface Discarded {
  discarded: string;
  head: string;
  /** Paths moved to the recycle area. */
  recycled: string[];
  /** Ids of the leases revoked with the branch. */
  revokedLeases: string[];
}

// ---- recycle area -----------------------------------------------------------------------------

/** A row of `nas trash list`: `pending` (its commit has not landed), a folder's `contents` (what one deletion took with it), each of those `within` the folder's id. */
export type TrashListed = TrashRecord & { pending?: true; contents?: { count: number; bytes: number }; within?: string };

export interface TrashRestored {
  restored: TrashRecord;
  /** The path it was restored to. */
  to: string;
  view: string;
  head: string;
  /** A folder's: the paths restored with it (what was deleted with it in one operation), where they went. */
  contents?: string[];
}

// ---- leases -------------------------------------------------------------------------------------

/** A lease as shown: never its token's hash. */
export type LeaseView = Omit<Lease, 'token_sha256'> & { status: 'active' | 'expired' | 'revoked' };

/** Who owns a branch view's files now, after the leases were applied, and who shares the owner's rights there. */
export interface BranchAccess {
  /** The write lease in force, if any. */
  lease: string | null;
  /** The Home's owner account: what has no record is its own, in every view. */
  owner: Owner;
  /** The uids of the write leases' principals, each an ACL entry with the owner's rights on what it owns here. */
  shared_with: number[];
  /** Set when the principal is no local account, so it shares nothing. */
  warning?: string;
}

export interface LeaseIssued {
  lease: LeaseView;
  /** Shown once: only its secret's hash is stored. */
  token: string;
  access: BranchAccess | undefined;
}

// ---- Agent PRs ----------------------------------------------------------------------------------

/** One line of `nas pr list`. */
export interface PrSummary {
  id: number;
  branch: string;
  state: PullRequest['state'];
  intent: string;
  principal: string;
  /** `name:pass name:FAIL ...` */
  checks: string;
  created: string;
  updated: string;
  /** Who merged it (`policy` or the owner), or who turned it down. */
  merged_by?: string;
  rejected_by?: string;
  /** The later PR of its branch that replaced it (state superseded). */
  superseded_by?: number;
  /** How the run whose work it is ended (`0`, `3`, `SIGTERM`), when it is a run's; `run_failed` when not 0. */
  exit?: string;
  run_failed?: boolean;
  imported?: PullRequest['imported'];
  reverts?: PullRequest['reverts'];
}

/** One PR in the decision inbox (`nas pr inbox`, the web page): everything a person needs to decide. */
export interface Decision {
  home: string;
  id: number;
  state: PullRequest['state'];
  intent: string;
  branch: string;
  run?: string;
  principal: string;
  created: string;
  /** Files changed, and the first few of them (`M path`). */
  files: number;
  paths: string[];
  checks: { name: string; ok: boolean }[];
  /** Why it waits, conflicts or failed. */
  reasons: string[];
  /** How the run whose work it is ended (`0`, `3`, `SIGTERM`); `run_failed` when not 0: a mark for the person deciding. */
  exit?: string;
  run_failed?: boolean;
  /** It came with an import (made in the Home exported): a mark for the person deciding. */
  imported?: PullRequest['imported'];
}

/** A file a PR changes, as the web page lists it: binary files are named with their sizes. */
export interface PrFile {
  path: string;
  status: string;
  binary: boolean;
  before?: number;
  after?: number;
  /** Full modes in octal, setuid, setgid and sticky bits included (`104755`). */
  beforeMode?: string;
  afterMode?: string;
  /** Metadata changed, before -> after: mode, owner, group by name, times where the content did not change. */
  meta?: MetaChange[];
  /** The caller could not read it through the mount: the diff names it but shows none of its content. */
  withheld?: boolean;
}

/** A file of a PR as its branch proposed it (the PR's head) or as main has it now; the web page serves it as text. */
export interface PrFileContent {
  path: string;
  side: 'branch' | 'main';
  commit: string;
  /** base64 */
  content: string;
}

export type { MetaChange, ShownFolder } from '../merge/shown-diff.js';

/** `nas web open`: a one-time login link for the web page. */
export interface WebLogin {
  url: string;
  expires: string;
}

export interface PrDetail extends PullRequest {
  diff: string;
  files: PrFile[];
  /** Folders the PR adds, or whose own mode, owner or times it changes (with what changed). */
  folders: ShownFolder[];
  /** Paths whose content the caller could not read through the mount: the diff does not show it. */
  withheld: string[];
  /** The read manifest: `<oid> <path>` lines. */
  reads: string;
}

// ---- memory -------------------------------------------------------------------------------------

export interface MemoryCheckReport extends CheckReport {
  view: string;
  commit: string;
}

/** `nas memory index --check`: the index rules only, nothing written. */
export interface IndexCheckReport {
  view: string;
  commit: string;
  ok: boolean;
  errors: number;
  warnings: number;
  findings: Finding[];
  indexes: string[];
}

/** `nas memory index`: the index blocks regenerated and committed in the branch. */
export interface IndexWriteReport {
  view: string;
  written: string[];
  indexes: string[];
  /** Broken markers: those files are not rewritten. */
  problems: { path: string; line: number; message: string }[];
  ok: boolean;
  head: string;
}

export type IndexReport = IndexCheckReport | IndexWriteReport;

export const isIndexWrite = (r: IndexReport): r is IndexWriteReport => 'written' in r;

export type MeasureReport = { view: string } & ReturnType<typeof measure>;

export interface ContextReport extends ContextLists, SharedContexts {
  view: string;
  /** The view's path under the mount: the lists' paths are relative to it. */
  root: string;
}

export interface BriefingReport extends Briefing {
  view: string;
}

export interface ImportReport {
  view: string;
  imported: { from: string; to: string }[];
  refused: { from: string; reason: string }[];
  ok: boolean;
  head: string;
}

export interface ReviewResult {
  reviewed: string;
  to: string;
  commit: string;
  /** Index files rewritten in the same commit. */
  regenerated: string[];
}

// ---- Runs -----------------------------------------------------------------------------------------

/** One run as `nas run` starts it: where it works and what it holds (the token is shown to the launcher only). */
export interface RunStart {
  id: string;
  branch: string;
  /** `<role>@<branch>` under the mount, and the Home's own path that the run's namespace shows it at. */
  view: string;
  viewPath: string;
  homePath: string;
  lease: string;
  token: string;
  /** The run's own control socket (reachable by its user; no owner action is taken on it). */
  socket: string;
  /** The briefing for the agent (readable by the run's user). */
  briefing: string;
  /** nasd's state directory: hidden inside the run, so the Store is reached only through the views. */
  store: string;
  uid: number; gid: number;
  /** The lease has the egress scope: the host's network (else a network namespace of its own, loopback only). */
  egress: boolean;
}

export interface RunStarted {
  task?: string;
  /** The main commit every attempt forked from. */
  fork: string;
  runs: RunStart[];
}

/** A run's record, with its PR's reasons to wait or fail when it has one. */
export interface RunView extends RunRecord {
  pr_reasons?: string[];
}

export interface PickResult {
  task: string;
  chosen: string;
  pr: PullRequest;
  /** Attempts whose work went to the recycle area (only once the chosen one merged). */
  discarded: string[];
}

// ---- Checkpoints and restore ----------------------------------------------------------------------

export type { Checkpoint } from '../home/checkpoints.js';

export interface Restored {
  view: string;
  /** The commit restored from. */
  from: string;
  restored: string[];
  /** Paths the branch had that the restored state does not (they went to the recycle area). */
  removed: string[];
  refused: { path: string; reason: string }[];
  head: string;
}

/** `nas why`: the newest refusals the mount answered for a path (or anywhere), each with its reason. */
export interface WhyReport {
  mount: string;
  /** The path asked about, under the mount (absent: every path). */
  path?: string;
  /** Whose refusals are shown: every user's (the owner), one uid's (a run's user, a lease's principal), or none. */
  shown: 'all' | { uid: number } | 'none';
  /** The path's view is read-only (main, history, held elsewhere, expired): what it is, where to write instead; to anyone. */
  readOnly?: string;
  refusals: { path: string; other?: string; op: string; code: string; why: string; uid?: number; pid?: number; at: string }[];
}

export interface LogEntry {
  commit: string;
  parents: string[];
  time: string;
  subject: string;
  /** Nas-Run, Nas-Lease, Nas-Principal, Nas-Intent, Nas-Branch ... as the commit message carries them. */
  trailers: Record<string, string>;
}

export interface DiffReport {
  view: string;
  from: string;
  to: string;
  /** `meta`: what of the file's metadata changed (as PrFile's). */
  changes: { path: string; status: string; meta?: MetaChange[] }[];
  /** Folders added, or whose own mode, owner or times changed. */
  folders: ShownFolder[];
  patch: string;
  /** Paths whose content the caller could not read through the mount: the patch does not show it. */
  withheld: string[];
}

export interface TrashPurged {
  /** What was deleted before this time is gone from the recycle area. */
  cutoff: string;
  purged: TrashRecord[];
}

/** What `nas maintenance run` did to one Home. */
export interface MaintenanceReport {
  role: string;
  /** Recycle-area entries deleted before this were removed for good. */
  cutoff: string;
  purged: number;
  /** Expired branches removed after their grace period (their work is in the recycle area). */
  discarded: string[];
  /** Waiting PRs whose branch is gone, now expired. */
  expiredPrs: number[];
  /** The object store before and after packing (unreachable objects older than the window pruned). */
  objects: { before: ObjectCounts; after: ObjectCounts };
  ms: number;
}

/** `nas export`: the file written (a git bundle of every ref). */
export interface Exported {
  role: string;
  file: string;
  bytes: number;
  refs: number;
  ms: number;
}

/** `nas import`: the Home made from the file. */
export interface Imported extends HomeSummary {
  file: string;
  refs: number;
  ms: number;
}

/** `nas home adopt`: the Home made from a repository, and the PR that adds its `.nas/` files. */
export interface Adopted extends HomeSummary {
  source: string;
  /** The source's default branch, whose history main now has. */
  branch: string;
  /**
   * What the PR proposes: the repository's own `.nas/` files and the executables its checks name (held from main
   * until approved), and the start set's files it lacks; none (then there is no PR) when there is nothing of these.
   */
  proposed: string[];
  pr?: number;
  prState?: string;
}

/** `nas home retire`: what the successor received, and the PR that carries it. */
export interface Retired {
  role: string;
  successor: string;
  /** Paths in the successor's PR branch (quarantined notes and skills). */
  handedOver: string[];
  pr?: number;
}

/** A git remote a Home mirrors to (`nas remote`). */
export interface RemoteView {
  role: string;
  /** Its name in the Store's git config (`nas-<n>`). */
  name: string;
  url: string;
  /** When every ref last reached it, and the last push's error if it failed since. */
  pushed?: string;
  error?: string;
}
