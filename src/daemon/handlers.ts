import type { Body, Params, Result, RouteName } from '../api/contract.js';
import type { Workflows } from '../workflows/all.js';
import type { WebLogins } from './web-sessions.js';
import { requireOwner, type Credentials } from '../api/credentials.js';

/**
 * What each route of the control API does: who may (requireOwner, leases.authorize), then the workflow.
 * Bodies arrive validated against the contract; control.ts is the transport around this table.
 */

export interface Request<K extends RouteName> {
  params: Params<K>;
  body: Body<K>;
  creds: Credentials;
}

export type Handler<K extends RouteName> = (req: Request<K>) => Promise<Result<K>> | Result<K>;

/** One handler per route: a route missing here does not compile. */
export type Handlers = { [K in RouteName]: Handler<K> };

export function handlers(flows: Workflows, web: WebLogins, stateDir: string): Handlers {
  const { branches, trash, homes, memory, leases, prs, runs, history, maintenance, lifecycle, remotes } = flows;
  const owner = (c: Credentials, action: string) => requireOwner(c, action, stateDir);
  // Writing into a branch needs a lease with write on it, or the owner (main refuses writes on its own).
  const writer = async (role: string, branch: string | undefined, c: Credentials, action: string) => {
    if (branch && branch !== 'main') await leases.authorize(role, branch, 'write', c, `${action} in ${role}/${branch}`);
  };
  return {
    status: () => homes.status(),

    listHomes: () => homes.listHomes(),
    createHome: ({ body: b, creds }) => (owner(creds, 'creating a Home'), homes.createHome(b.role, b.template, b.owner ?? 'root')),

    listBranches: ({ params }) => branches.listBranches(params.role),
    createBranch: ({ params, body: b, creds }) =>
      (owner(creds, 'creating a branch'), branches.createBranch(params.role, b.branch, { from: b.from, ttl: b.ttl, run: b.run })),
    discardBranch: async ({ params: { role, branch }, creds }) => {
      await leases.authorize(role, branch, 'write', creds, `discarding ${role}/${branch}`);
      const result = await branches.discardBranch(role, branch);
      return { ...result, revokedLeases: await leases.revokeBranch(role, branch) };
    },
    extendBranch: ({ params: { role, branch }, body, creds }) =>
      (owner(creds, 'extending a branch'), branches.extendBranch(role, branch, body.ttl)),
    sync: ({ params, body }) => branches.sync(params.role, body.branch),

    listTrash: ({ params }) => trash.trashList(params.role),
    restoreTrash: async ({ params: { role }, body, creds }) => {
      await writer(role, await trash.trashTarget(role, body), creds, 'restoring from the recycle area');
      return trash.trashRestore(role, body);
    },

    purgeTrash: ({ params, body, creds }) => maintenance.purgeTrash(params.role, body.olderThan, creds),

    listLeases: ({ params }) => leases.list(params.role),
    issueLease: ({ params, body: { branch, ...opts }, creds }) => leases.issue(params.role, branch, opts, creds),
    revokeLease: ({ params, creds }) => leases.revoke(params.role, params.id, creds),

    propose: ({ params, body: b, creds }) => prs.propose(params.role, b.branch, { intent: b.intent, checks: b.checks }, creds),
    listPrs: ({ params }) => prs.list(params.role),
    decisions: () => prs.decisions(),
    webLogin: ({ creds }) => web.login(creds),
    prStats: ({ params }) => prs.stats(params.role),
    // A PR id that is not a whole number is refused by the service, with what to do.
    showPr: ({ params, creds }) => prs.show(params.role, Number(params.id), creds),
    approvePr: ({ params, creds }) => prs.approve(params.role, Number(params.id), creds),
    rejectPr: ({ params, body, creds }) => prs.reject(params.role, Number(params.id), body.why, creds),

    memoryCheck: ({ params, body }) => memory.check(params.role, body.branch),
    memoryIndex: async ({ params: { role }, body: b, creds }) => {
      if (b.check !== true) await writer(role, b.branch, creds, 'regenerating indexes');
      return memory.index(role, b.branch, b.check === true);
    },
    memoryMeasure: ({ params, body }) => memory.measure(params.role, body.branch, body.tasks ?? []),
    memoryImport: async ({ params: { role }, body, creds }) => {
      await writer(role, body.branch, creds, 'importing notes');
      return memory.import(role, body.branch, body.files);
    },
    memoryReview: ({ params, body, creds }) => memory.review(params.role, body.path, body.description, creds),
    context: ({ params, body }) => memory.context(params.role, body.branch),
    briefing: ({ params, body, creds }) => memory.briefing(params.role, body.branch, body.maxTokens ?? 2000, creds),

    startRun: ({ params, body, creds }) => runs.start(params.role, body, creds),
    attachRun: ({ params, body, creds }) => runs.attach(params.role, params.id, body, creds),
    finishRun: ({ params, body, creds }) => runs.finish(params.role, params.id, body, creds),
    listRuns: ({ params }) => runs.list(params.role),
    pickRun: ({ params, body, creds }) => runs.pick(params.role, params.task, body.run, creds),

    createCheckpoint: ({ params, body, creds }) => history.create(params.role, body, creds),
    listCheckpoints: ({ params }) => history.list(params.role),
    deleteCheckpoint: ({ params, creds }) => history.delete(params.role, params.name, creds),
    restore: ({ params, body, creds }) => history.restore(params.role, body, creds),
    proposeConfig: ({ params, body, creds }) => history.proposeConfig(params.role, body, creds),
    log: ({ params, body, creds }) => history.log(params.role, body, creds),
    diff: ({ params, body, creds }) => history.diff(params.role, body, creds),
    maintenance: ({ body, creds }) => maintenance.run(body.role, creds),
    exportHome: ({ params, body, creds }) => (owner(creds, 'exporting a Home'), homes.exportHome(params.role, body.file)),
    addRemote: ({ params, body, creds }) => remotes.add(params.role, body.url, creds),
    listRemotes: ({ params }) => remotes.list(params.role),
    removeRemote: ({ params, body, creds }) => remotes.remove(params.role, body.url, creds),
    archiveHome: ({ params, creds }) => lifecycle.archive(params.role, creds),
    unarchiveHome: ({ params, creds }) => lifecycle.unarchive(params.role, creds),
    retireHome: ({ params, body, creds }) => lifecycle.retire(params.role, body.successor, creds),
    importHome: ({ body, creds }) => (owner(creds, 'importing a Home'), homes.importHome(body.file, body.as)),
  };
}
