import type { TrashRecord } from '../trash/trash.js';
import type { PullRequest } from '../merge/pr-store.js';
import type { PrStats } from '../merge/propose.js';
import type { BodyOf, PathParams, Schema } from './schema.js';
import type {
  BranchCreated, BranchExtended, BranchListing, BriefingReport, ContextReport, Discarded, HomeSummary, ImportReport, IndexReport,
  LeaseIssued, LeaseView, MeasureReport, MemoryCheckReport, PrDetail, PrSummary, ReviewResult, StatusReport,
  SyncResult, TrashRestored, RunStarted, RunView, PickResult, Checkpoint, Restored, LogEntry, DiffReport, TrashPurged, MaintenanceReport, Exported, Imported, Retired, RemoteView, Decision, WebLogin,
} from './types.js';

/**
 * The control API, JSON over HTTP on nasd's unix socket: every route with its method, path pattern and
 * body fields, in the one table both sides use. The daemon routes and validates by it (control.ts,
 * validate.ts); the CLI builds its requests from it (client.ts). What each route answers is in Results.
 */

export type Method = 'GET' | 'POST';

export interface RouteSpec {
  method: Method;
  /** `:name` segments are path parameters (URI-encoded on the wire). */
  path: string;
  body: Schema;
}

const none = {} as const;

export const ROUTES = {
  status: { method: 'GET', path: '/v1/status', body: none },

  listHomes: { method: 'GET', path: '/v1/homes', body: none },
  createHome: { method: 'POST', path: '/v1/homes', body: { role: 'string', template: 'string?', owner: 'string?' } },

  listBranches: { method: 'GET', path: '/v1/homes/:role/branches', body: none },
  createBranch: { method: 'POST', path: '/v1/homes/:role/branches', body: { branch: 'string', from: 'string?', ttl: 'string?', run: 'string?' } },
  discardBranch: { method: 'POST', path: '/v1/homes/:role/branches/:branch/discard', body: none },
  extendBranch: { method: 'POST', path: '/v1/homes/:role/branches/:branch/extend', body: { ttl: 'string' } },
  sync: { method: 'POST', path: '/v1/homes/:role/sync', body: { branch: 'string?' } },

  listTrash: { method: 'GET', path: '/v1/homes/:role/trash', body: none },
  restoreTrash: { method: 'POST', path: '/v1/homes/:role/trash/restore', body: { path: 'string?', id: 'string?', branch: 'string?', to: 'string?' } },
  purgeTrash: { method: 'POST', path: '/v1/homes/:role/trash/purge', body: { olderThan: 'string?' } },

  listLeases: { method: 'GET', path: '/v1/homes/:role/leases', body: none },
  issueLease: {
    method: 'POST',
    path: '/v1/homes/:role/leases',
    body: {
      branch: 'string', principal: 'string?', ttl: 'string?', scopes: 'string?',
      budget: { kind: 'number?', message: '--budget must be a whole number of bytes (0 or more)' },
    },
  },
  revokeLease: { method: 'POST', path: '/v1/homes/:role/leases/:id/revoke', body: none },

  propose: { method: 'POST', path: '/v1/homes/:role/prs', body: { branch: 'string', intent: 'string?', checks: 'strings?' } },
  listPrs: { method: 'GET', path: '/v1/homes/:role/prs', body: none },
  decisions: { method: 'GET', path: '/v1/decisions', body: none },
  webLogin: { method: 'POST', path: '/v1/web/login', body: none },
  prStats: { method: 'GET', path: '/v1/homes/:role/prs/stats', body: none },
  showPr: { method: 'GET', path: '/v1/homes/:role/prs/:id', body: none },
  approvePr: { method: 'POST', path: '/v1/homes/:role/prs/:id/approve', body: none },
  rejectPr: { method: 'POST', path: '/v1/homes/:role/prs/:id/reject', body: { why: 'string?' } },

  memoryCheck: { method: 'POST', path: '/v1/homes/:role/memory/check', body: { branch: 'string?' } },
  memoryIndex: { method: 'POST', path: '/v1/homes/:role/memory/index', body: { branch: 'string?', check: 'boolean?' } },
  memoryMeasure: { method: 'POST', path: '/v1/homes/:role/memory/measure', body: { branch: 'string?', tasks: 'strings?' } },
  memoryImport: { method: 'POST', path: '/v1/homes/:role/memory/import', body: { branch: 'string?', files: 'files' } },
  memoryReview: { method: 'POST', path: '/v1/homes/:role/memory/review', body: { path: 'string', description: 'string?' } },
  context: { method: 'POST', path: '/v1/homes/:role/context', body: { branch: 'string?' } },
  briefing: { method: 'POST', path: '/v1/homes/:role/briefing', body: { branch: 'string?', maxTokens: 'number?' } },

  startRun: {
    method: 'POST',
    path: '/v1/homes/:role/runs',
    body: {
      user: 'string', command: 'strings?', intent: 'string?', ttl: 'string?', cwd: 'string?', launcher: 'number?',
      budget: { kind: 'number?', message: '--budget must be a size in bytes (e.g. 50M, 2G, 1000)' },
      attempts: { kind: 'number?', message: '--attempts must be a whole number from 1 to 16' },
    },
  },
  attachRun: { method: 'POST', path: '/v1/homes/:role/runs/:id/attach', body: { ns: 'string' } },
  finishRun: {
    method: 'POST',
    path: '/v1/homes/:role/runs/:id/finish',
    body: { started: 'boolean?', exit: 'number?', signal: 'string?', propose: 'boolean?' },
  },
  listRuns: { method: 'GET', path: '/v1/homes/:role/runs', body: none },
  pickRun: { method: 'POST', path: '/v1/homes/:role/tasks/:task/pick', body: { run: 'string' } },

  createCheckpoint: { method: 'POST', path: '/v1/homes/:role/checkpoints', body: { name: 'string', branch: 'string?', message: 'string?' } },
  listCheckpoints: { method: 'GET', path: '/v1/homes/:role/checkpoints', body: none },
  deleteCheckpoint: { method: 'POST', path: '/v1/homes/:role/checkpoints/:name/delete', body: none },
  restore: { method: 'POST', path: '/v1/homes/:role/restore', body: { branch: 'string', from: 'string', paths: 'strings?' } },
  proposeConfig: { method: 'POST', path: '/v1/homes/:role/config', body: { file: 'string', content: 'string', intent: 'string?' } },
  log: { method: 'POST', path: '/v1/homes/:role/log', body: { branch: 'string?', path: 'string?', limit: 'number?' } },
  maintenance: { method: 'POST', path: '/v1/maintenance', body: { role: 'string?' } },
  exportHome: { method: 'POST', path: '/v1/homes/:role/export', body: { file: 'string' } },
  importHome: { method: 'POST', path: '/v1/import', body: { file: 'string', as: 'string?' } },
  addRemote: { method: 'POST', path: '/v1/homes/:role/remotes', body: { url: 'string' } },
  listRemotes: { method: 'GET', path: '/v1/homes/:role/remotes', body: none },
  removeRemote: { method: 'POST', path: '/v1/homes/:role/remotes/remove', body: { url: 'string' } },
  archiveHome: { method: 'POST', path: '/v1/homes/:role/archive', body: none },
  unarchiveHome: { method: 'POST', path: '/v1/homes/:role/unarchive', body: none },
  retireHome: { method: 'POST', path: '/v1/homes/:role/retire', body: { successor: 'string' } },
  diff: { method: 'POST', path: '/v1/homes/:role/diff', body: { branch: 'string?', from: 'string?', to: 'string?', path: 'string?' } },
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
  sync: SyncResult;
  listTrash: TrashRecord[];
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
  approvePr: PullRequest;
  rejectPr: PullRequest;
  memoryCheck: MemoryCheckReport;
  memoryIndex: IndexReport;
  memoryMeasure: MeasureReport;
  memoryImport: ImportReport;
  memoryReview: ReviewResult;
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
  addRemote: RemoteView;
  listRemotes: RemoteView[];
  removeRemote: RemoteView;
  archiveHome: HomeSummary;
  unarchiveHome: HomeSummary;
  retireHome: Retired;
}

export type Params<K extends RouteName> = PathParams<(typeof ROUTES)[K]['path']>;
export type Body<K extends RouteName> = BodyOf<(typeof ROUTES)[K]['body']>;
export type Result<K extends RouteName> = Results[K];

/** The answer on the wire: the result, or a message that says what is wrong and what to do. */
export type Reply<K extends RouteName> = { ok: true; result: Result<K> } | { ok: false; error: string };

export const ROUTE_NAMES = Object.keys(ROUTES) as RouteName[];
