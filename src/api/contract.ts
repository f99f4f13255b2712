import type { PullRequest } from '../merge/pr-store.js';
import type { PrStats } from '../merge/propose.js';
import type { ClusterStatus } from '../cluster/status.js';
import type { VerifyReport } from '../cluster/verify.js';
import type { BodyOf, PathParams, Schema } from './schema.js';
import type { ShareResult } from '../memory/shared.js';
import type {
  BranchCreated, BranchExtended, BranchListing, BranchResolved, BranchUpdated, BriefingReport, ContextReport, Discarded, HomeSummary, ImportReport, IndexReport,
  LeaseIssued, LeaseView, MeasureReport, MemoryCheckReport, PrDetail, PrFileContent, PrSummary, ReviewResult, StatusReport,
  SyncResult, WhyReport, TrashListed, TrashRestored, RunStarted, RunView, PickResult, Checkpoint, Restored, LogEntry, DiffReport, TrashPurged, MaintenanceReport, Exported, Imported, Adopted, Retired, RemoteView, Decision, WebLogin,
} from './types.js';

/**
 * The control API, JSON over HTTP on nasd's unix socket: every route with its method, path pattern, body
 * fields and who may call it, in the one table both sides use. The daemon routes, validates and checks the
 * caller by it (paths.ts, validate.ts, daemon/handlers.ts); the CLI builds its requests from it (client.ts).
 * What each route answers is in Results.
 */

export type Method = 'GET' | 'POST';

/**
 * Who may call a route. The daemon checks it once, after the body is validated and before the handler runs
 * (daemon/handlers.ts), with the words and statuses of `requireOwner` and `LeaseService.authorize`:
 * - `anyone`: whoever reaches the socket (what a read shows may still depend on the caller: workflows/readers.ts);
 * - `{ owner }`: the owner credential, which no lease carries; the refusal (403) names the action;
 * - `{ lease }`: a lease that grants that scope on the branch the request names (`branch`: where from), or the
 *   owner; refused with 401 without either, 403 when the lease does not grant it. `action` names the request in
 *   the refusal, `{branch}` standing for role/branch. `readOnlyIf` names a body flag that makes the request a
 *   read, which anyone may do;
 * - `{ workflow }`: the workflow checks who may, with more than one of the rules above; the words say what it
 *   checks and why the check stays there.
 */
export type Access =
  | 'anyone'
  | { owner: string }
  | { lease: 'write'; branch: BranchOf; action: string; readOnlyIf?: string }
  | { workflow: string };

/**
 * Where a lease rule finds its branch:
 * - `path`: the route's `:branch`, always checked (main too);
 * - `body`: `body.branch`, the branch the request writes into; none named, or main, needs no lease (the route
 *   then works on main, which takes no writes but merges, and refuses on its own).
 */
export type BranchOf = 'path' | 'body';

interface RouteBase {
  /** `:name` segments are path parameters (URI-encoded on the wire). */
  path: string;
  body: Schema;
  who: Access;
  /**
   * The web page may call it (through the owner's session, src/daemon/web-server.ts): what the page shows, and
   * the owner's decisions there (approve, reject, revert, restore). Any other route answers the page 404.
   */
  web?: true;
}

/** A GET reads: the mount keeps what it has of every view. */
export interface ReadRoute extends RouteBase {
  method: 'GET';
}

/**
 * A POST says what it does to the views the mount shows (a route without `views` does not compile):
 * - `change`: it may change them (a merge, a restore, a branch made, a lease that shares a branch...): the answer
 *   waits until the mount has let go of what it kept of the route's Home (every Home's without `:role`), so
 *   whoever asked reads the change at once (daemon/handlers.ts);
 * - `keep`: nothing any view shows changes (a read sent as POST; a commit, whose files look the same after it).
 */
export interface ChangeRoute extends RouteBase {
  method: 'POST';
  views: 'change' | 'keep';
}

export type RouteSpec = ReadRoute | ChangeRoute;

const none = {} as const;
const anyone = 'anyone';
const owner = (action: string) => ({ owner: action });
const writer = (branch: BranchOf, action: string) => ({ lease: 'write', branch, action } as const);

export const ROUTES = {
  status: { method: 'GET', path: '/v1/status', body: none, who: anyone, web: true },

  listHomes: { method: 'GET', path: '/v1/homes', body: none, who: anyone, web: true },
  createHome: { method: 'POST', path: '/v1/homes', body: { role: 'string', template: 'string?', owner: 'string?' }, who: owner('creating a Home'), views: 'change' },

  listBranches: { method: 'GET', path: '/v1/homes/:role/branches', body: none, who: anyone, web: true },
  createBranch: {
    method: 'POST', path: '/v1/homes/:role/branches', body: { branch: 'string', from: 'string?', ttl: 'string?', run: 'string?' },
    who: owner('creating a branch'), views: 'change',
  },
  discardBranch: { method: 'POST', path: '/v1/homes/:role/branches/:branch/discard', body: none, who: writer('path', 'discarding {branch}'), views: 'change' },
  extendBranch: { method: 'POST', path: '/v1/homes/:role/branches/:branch/extend', body: { ttl: 'string' }, who: owner('extending a branch'), views: 'change' },
  updateBranch: { method: 'POST', path: '/v1/homes/:role/branches/:branch/update', body: none, who: writer('path', 'updating {branch} from main'), views: 'change' },
  resolveBranch: {
    method: 'POST', path: '/v1/homes/:role/branches/:branch/resolve',
    body: { path: 'string', take: { kind: 'string', message: 'take must be "branch" or "main"' } },
    who: writer('path', 'resolving a conflict in {branch}'), web: true, views: 'change',
  },
  sync: { method: 'POST', path: '/v1/homes/:role/sync', body: { branch: 'string?' }, who: anyone, views: 'keep' },

  // Anyone asks; each is shown what it could read where it was deleted (workflows/trash.ts).
  listTrash: { method: 'GET', path: '/v1/homes/:role/trash', body: none, who: anyone, web: true },
  restoreTrash: {
    method: 'POST', path: '/v1/homes/:role/trash/restore', body: { path: 'string?', id: 'string?', branch: 'string?', to: 'string?' },
    // The branch is --branch, else the one the entry was deleted from, which only its record says: decided from the
    // request and the record before anything is committed, with the read rule of the list (trash.trashRestore).
    who: {
      workflow: 'a lease that grants write on the branch the restore goes into (body.branch, else where the entry was deleted), ' +
        'or the owner; who is not the owner, only what it could read where it was deleted',
    },
    web: true, views: 'change',
  },
  purgeTrash: { method: 'POST', path: '/v1/homes/:role/trash/purge', body: { olderThan: 'string?' }, who: owner('purging the recycle area'), views: 'change' },

  // Anyone asks; the owner sees every lease, a lease holder or a run its own, anyone else none (workflows/shown-to.ts).
  listLeases: { method: 'GET', path: '/v1/homes/:role/leases', body: none, who: anyone, web: true },
  issueLease: {
    method: 'POST',
    path: '/v1/homes/:role/leases',
    body: {
      branch: 'string', principal: 'string?', ttl: 'string?', scopes: 'string?',
      budget: { kind: 'number?', message: '--budget must be a whole number of bytes (0 or more)' },
    },
    // Which rule applies depends on the credential, and the branch is checked before either (leases.issue).
    who: { workflow: 'the owner; or, with a lease token, a lease in force that the new lease only narrows (a sub-lease)' }, views: 'change',
  },
  revokeLease: { method: 'POST', path: '/v1/homes/:role/leases/:id/revoke', body: none, who: owner('revoking a lease'), views: 'change' },

  propose: {
    method: 'POST', path: '/v1/homes/:role/prs', body: { branch: 'string', intent: 'string?', checks: 'strings?' },
    // Checked again when the PR is filed (the lease must outlive the checks), and the same for every proposal
    // nasd makes for a caller (a run's end, a picked attempt, a retirement, a config change): prs.propose.
    who: { workflow: 'a lease that grants propose:main on body.branch, or the owner' }, views: 'change',
  },
  listPrs: { method: 'GET', path: '/v1/homes/:role/prs', body: none, who: anyone, web: true },
  decisions: { method: 'GET', path: '/v1/decisions', body: none, who: anyone, web: true },
  webLogin: { method: 'POST', path: '/v1/web/login', body: none, who: owner('opening the web page'), views: 'keep' },
  prStats: { method: 'GET', path: '/v1/homes/:role/prs/stats', body: none, who: anyone, web: true },
  showPr: { method: 'GET', path: '/v1/homes/:role/prs/:id', body: none, who: anyone, web: true },
  // A file of a PR, as its branch proposed it or as main has it (:side): the web page's links, served there as
  // plain text (web-server.ts). The owner's: it reads everything through the mount, so nothing is withheld.
  prFile: { method: 'GET', path: '/v1/homes/:role/prs/:id/file/:side/:path', body: none, who: owner('reading a file of a PR'), web: true },
  approvePr: { method: 'POST', path: '/v1/homes/:role/prs/:id/approve', body: none, who: owner('approving a PR'), web: true, views: 'change' },
  rejectPr: { method: 'POST', path: '/v1/homes/:role/prs/:id/reject', body: { why: 'string?' }, who: owner('rejecting a PR'), web: true, views: 'change' },
  // Who may undo a merge is who may make one: the owner. The undoing is a new PR, through the same gate (history.revert).
  revertPr: { method: 'POST', path: '/v1/homes/:role/prs/:id/revert', body: none, who: owner('reverting a PR'), web: true, views: 'change' },

  memoryCheck: { method: 'POST', path: '/v1/homes/:role/memory/check', body: { branch: 'string?' }, who: anyone, views: 'keep' },
  memoryIndex: {
    method: 'POST', path: '/v1/homes/:role/memory/index', body: { branch: 'string?', check: 'boolean?' },
    who: { ...writer('body', 'regenerating indexes in {branch}'), readOnlyIf: 'check' }, views: 'change',
  },
  memoryMeasure: { method: 'POST', path: '/v1/homes/:role/memory/measure', body: { branch: 'string?', tasks: 'strings?' }, who: anyone, views: 'keep' },
  memoryImport: {
    method: 'POST', path: '/v1/homes/:role/memory/import', body: { branch: 'string?', files: 'files' },
    who: writer('body', 'importing notes in {branch}'), views: 'change',
  },
  memoryReview: {
    method: 'POST', path: '/v1/homes/:role/memory/review', body: { path: 'string', description: 'string?' }, who: owner('reviewing a note'), views: 'change',
  },
  memoryShare: {
    method: 'POST', path: '/v1/homes/:role/memory/share', body: { path: 'string', to: 'string' }, who: owner('sharing a memory note'), views: 'change',
  },
  context: { method: 'POST', path: '/v1/homes/:role/context', body: { branch: 'string?' }, who: anyone, views: 'keep' },
  briefing: { method: 'POST', path: '/v1/homes/:role/briefing', body: { branch: 'string?', maxTokens: 'number?' }, who: anyone, views: 'keep' },

  // Every run route is the owner's: on a run's own socket the owner credential counts for nothing (control.ts).
  startRun: {
    method: 'POST',
    path: '/v1/homes/:role/runs',
    body: {
      user: 'string', command: 'strings?', intent: 'string?', ttl: 'string?', cwd: 'string?', launcher: 'number?', egress: 'boolean?',
      budget: { kind: 'number?', message: '--budget must be a size in bytes (e.g. 50M, 2G, 1000)' },
      attempts: { kind: 'number?', message: '--attempts must be a whole number from 1 to 16' },
    },
    who: owner('starting a run'), views: 'change',
  },
  attachRun: { method: 'POST', path: '/v1/homes/:role/runs/:id/attach', body: { ns: 'string' }, who: owner('attaching a run'), views: 'change' },
  finishRun: {
    method: 'POST',
    path: '/v1/homes/:role/runs/:id/finish',
    body: { started: 'boolean?', exit: 'number?', signal: 'string?', propose: 'boolean?' },
    who: owner('finishing a run'), views: 'change',
  },
  // Anyone asks; as for leases: the owner every run, a run or a lease holder those of its branch (workflows/shown-to.ts).
  listRuns: { method: 'GET', path: '/v1/homes/:role/runs', body: none, who: anyone, web: true },
  pickRun: { method: 'POST', path: '/v1/homes/:role/tasks/:task/pick', body: { run: 'string' }, who: owner('picking an attempt'), views: 'change' },

  createCheckpoint: {
    method: 'POST', path: '/v1/homes/:role/checkpoints', body: { name: 'string', branch: 'string?', message: 'string?' },
    // Two rules by the branch, and the branch's name is checked before either (history.create).
    who: { workflow: 'of main, the owner; of a branch, a lease that grants write on it, or the owner' }, views: 'change',
  },
  listCheckpoints: { method: 'GET', path: '/v1/homes/:role/checkpoints', body: none, who: anyone, web: true },
  deleteCheckpoint: { method: 'POST', path: '/v1/homes/:role/checkpoints/:name/delete', body: none, who: owner('deleting a checkpoint'), views: 'change' },
  restore: {
    method: 'POST', path: '/v1/homes/:role/restore', body: { branch: 'string', from: 'string', paths: 'strings?' },
    // A restore into main is refused (409) and the branch's name checked before who asks (history.restore).
    who: { workflow: 'a lease that grants write on body.branch, or the owner' }, views: 'change',
  },
  proposeConfig: {
    method: 'POST', path: '/v1/homes/:role/config', body: { file: 'string', content: 'string', intent: 'string?' },
    who: owner('changing .nas/'), views: 'change',
  },
  log: { method: 'POST', path: '/v1/homes/:role/log', body: { branch: 'string?', path: 'string?', limit: 'number?' }, who: anyone, web: true, views: 'keep' },
  maintenance: { method: 'POST', path: '/v1/maintenance', body: { role: 'string?' }, who: owner('running maintenance'), views: 'change' },
  exportHome: { method: 'POST', path: '/v1/homes/:role/export', body: { file: 'string' }, who: owner('exporting a Home'), views: 'keep' },
  importHome: { method: 'POST', path: '/v1/import', body: { file: 'string', as: 'string?' }, who: owner('importing a Home'), views: 'change' },
  adoptHome: {
    method: 'POST', path: '/v1/adopt', body: { role: 'string', source: 'string', owner: 'string?' }, who: owner('adopting a repository as a Home'), views: 'change',
  },
  addRemote: { method: 'POST', path: '/v1/homes/:role/remotes', body: { url: 'string' }, who: owner('adding a remote'), views: 'change' },
  listRemotes: { method: 'GET', path: '/v1/homes/:role/remotes', body: none, who: anyone, web: true },
  removeRemote: { method: 'POST', path: '/v1/homes/:role/remotes/remove', body: { url: 'string' }, who: owner('removing a remote'), views: 'change' },
  archiveHome: { method: 'POST', path: '/v1/homes/:role/archive', body: none, who: owner('archiving a Home'), views: 'change' },
  unarchiveHome: { method: 'POST', path: '/v1/homes/:role/unarchive', body: none, who: owner('unarchiving a Home'), views: 'change' },
  retireHome: { method: 'POST', path: '/v1/homes/:role/retire', body: { successor: 'string' }, who: owner('retiring a Home'), views: 'change' },
  diff: {
    method: 'POST', path: '/v1/homes/:role/diff', body: { branch: 'string?', from: 'string?', to: 'string?', path: 'string?' },
    who: anyone, web: true, views: 'keep',
  },
  // Anyone asks; each sees only the refusals of the uid its credential speaks for (workflows/why.ts): the owner
  // every user's, a run its user's, a lease holder its principal's. Names and times of another user's attempts
  // tell what they are doing; nasd cannot tell a bare socket peer's uid, so it is shown none.
  why: { method: 'POST', path: '/v1/why', body: { path: 'string?', limit: 'number?' }, who: anyone, views: 'keep' },
  // Several hosts (src/cluster): what etcd and the git server say of this host's Homes.
  clusterStatus: { method: 'GET', path: '/v1/cluster', body: none, who: anyone, web: true },
  clusterVerify: { method: 'POST', path: '/v1/cluster/verify/:role', body: none, who: anyone, views: 'change' },
  clusterLeave: { method: 'POST', path: '/v1/cluster/leave', body: none, who: owner('draining this host of its writer roles'), views: 'change' },
  clusterJoin: { method: 'POST', path: '/v1/cluster/join', body: none, who: owner('letting this host stand for writer again'), views: 'change' },
  moveBranch: {
    method: 'POST', path: '/v1/homes/:role/branches/:branch/move', body: { to: 'string', force: 'boolean?' }, who: owner('moving a branch to another host'),
    views: 'change',
  },
  clusterWriter: { method: 'POST', path: '/v1/cluster/writer/:role', body: { to: 'string' }, who: owner('moving a Home\'s merge writer'), views: 'change' },
} as const satisfies Record<string, RouteSpec>;

export type RouteName = keyof typeof ROUTES;

/** What each route answers (the `result` of `{ ok: true, result }`). */
export interface Results {
  status: StatusReport;
  listHomes: HomeSummary[];
  createHome: HomeSummary;
  listBranches: BranchListing[];
  createBranch: BranchCreated;
  discardBranch: Discarded;
  extendBranch: BranchExtended;
  updateBranch: BranchUpdated;
  resolveBranch: BranchResolved;
  sync: SyncResult;
  listTrash: TrashListed[];
  restoreTrash: TrashRestored;
  purgeTrash: TrashPurged;
  listLeases: LeaseView[];
  issueLease: LeaseIssued;
  revokeLease: LeaseView;
  propose: PullRequest;
  listPrs: PrSummary[];
  decisions: Decision[];
  webLogin: WebLogin;
  prStats: PrStats;
  showPr: PrDetail;
  prFile: PrFileContent;
  approvePr: PullRequest;
  rejectPr: PullRequest;
  revertPr: PullRequest;
  memoryCheck: MemoryCheckReport;
  memoryIndex: IndexReport;
  memoryMeasure: MeasureReport;
  memoryImport: ImportReport;
  memoryReview: ReviewResult;
  memoryShare: ShareResult;
  context: ContextReport;
  briefing: BriefingReport;
  startRun: RunStarted;
  attachRun: RunView;
  finishRun: RunView;
  listRuns: RunView[];
  pickRun: PickResult;
  createCheckpoint: Checkpoint;
  listCheckpoints: Checkpoint[];
  deleteCheckpoint: Checkpoint;
  restore: Restored;
  proposeConfig: PullRequest;
  log: LogEntry[];
  diff: DiffReport;
  maintenance: MaintenanceReport[];
  exportHome: Exported;
  importHome: Imported;
  adoptHome: Adopted;
  addRemote: RemoteView;
  listRemotes: RemoteView[];
  removeRemote: RemoteView;
  archiveHome: HomeSummary;
  unarchiveHome: HomeSummary;
  retireHome: Retired;
  why: WhyReport;
  clusterStatus: ClusterStatus;
  clusterVerify: VerifyReport;
  clusterLeave: { host: string; released: string[]; held: string[] };
  clusterJoin: { host: string };
  moveBranch: { branch: string; from: string; to: string; head: string };
  clusterWriter: { home: string; writer: string | null; preferred: string | null };
}

export type Params<K extends RouteName> = PathParams<(typeof ROUTES)[K]['path']>;
export type Body<K extends RouteName> = BodyOf<(typeof ROUTES)[K]['body']>;
export type Result<K extends RouteName> = Results[K];

/** The answer on the wire: the result, or a message that says what is wrong and what to do. */
export type Reply<K extends RouteName> = { ok: true; result: Result<K> } | { ok: false; error: string };

export const ROUTE_NAMES = Object.keys(ROUTES) as RouteName[];
