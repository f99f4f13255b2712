import { ROUTES, type Access, type Body, type Params, type Result, type RouteName, type RouteSpec } from '../api/contract.js';
import type { Workflows } from '../workflows/all.js';
import { statusReport } from '../workflows/status.js';
import type { WebLogins } from './web-sessions.js';
import { requireOwner, type Credentials } from '../api/credentials.js';
import { UserError } from '../util/errors.js';

/**
 * What each route of the control API does: who may call it, as the contract declares it (checked here, once,
 * before the handler), then the workflow. Bodies arrive validated against the contract; control.ts is the
 * transport around this table.
 */

export interface Request<K extends RouteName> {
  params: Params<K>;
  body: Body<K>;
  creds: Credentials;
}

export type Handler<K extends RouteName> = (req: Request<K>) => Promise<Result<K>> | Result<K>;

/** One handler per route: a route missing here does not compile. */
export type Handlers = { [K in RouteName]: Handler<K> };

/** What names a request's subject, for the log (never content: bodies may carry files). */
const NAMING = ['branch', 'name', 'path', 'id', 'to', 'as', 'from'] as const;
const naming = (body: unknown): Record<string, string> => Object.fromEntries(NAMING.flatMap((k) => {
  const v = (body as Record<string, unknown> | null)?.[k];
  return typeof v === 'string' ? [[k, v.slice(0, 200)]] : [];
}));

/** Who made a request, for the log: never a credential itself. */
const byWhom = (creds: Credentials): string => (creds.run ? `run ${creds.run.id}` : creds.lease ? 'a lease holder' : creds.owner ? 'the owner' : 'a caller');

/** The table the transports call: each route's handler behind its declared rule of who may call it. */
export function handlers(flows: Workflows, web: WebLogins, stateDir: string): Handlers {
  const table = routes(flows, web);
  const mayCall = gate(flows, stateDir);
  const guarded: Partial<Record<RouteName, Handler<RouteName>>> = {};
  for (const name of Object.keys(table) as RouteName[]) {
    const handler = table[name] as Handler<RouteName>;
    const spec: RouteSpec = ROUTES[name];
    const changes = spec.method === 'POST' && spec.views === 'change';
    // A line for every request that changes something (a branch made, a restore, an export...), for an operator
    // reading the log later; the workflows add their own lines where there is more to say.
    const logged = changes || name === 'exportHome';
    guarded[name] = async (req) => {
      await mayCall(name, req);
      const result = changes ? await changingViews(req) : await handler(req);
      if (logged) flows.log.info({ route: name, ...(req.params as object), ...naming(req.body), by: byWhom(req.creds) }, `done: ${name}`);
      return result;
    };
    // A request that may change views (a merge, a restore, a new branch...) answers once the mount has let go of
    // what it kept of them: whoever asked reads the change at once, with the kernel's timeouts hours long.
    const changingViews: Handler<RouteName> = async (req) => {
      try {
        return await handler(req);
      } finally {
        await flows.homes.viewsChanged((req.params as { role?: string }).role ?? null);
      }
    };
  }
  return guarded as Handlers;
}

/**
 * The contract's `who` for a route, checked with the owner's and the leases' own words and statuses. A route
 * whose rule is `{ workflow }` passes here: its workflow checks.
 */
function gate(flows: Workflows, stateDir: string) {
  return async (route: RouteName, { params, body, creds }: Request<RouteName>): Promise<void> => {
    const who: Access = ROUTES[route].who;
    if (who === 'anyone' || 'workflow' in who) return;
    if ('owner' in who) return requireOwner(creds, who.owner, stateDir);
    const fields: Readonly<Record<string, unknown>> = body;
    if (who.readOnlyIf && fields[who.readOnlyIf] === true) return;
    const { role, branch: named } = params as { role: string; branch?: string };
    const branch = who.branch === 'path' ? named : (fields.branch as string | undefined);
    // What a request writes into main needs no lease: main takes no writes but merges, and refuses on its own.
    if (who.branch !== 'path' && (!branch || branch === 'main')) return;
    await flows.leases.authorize(role, branch ?? '', who.lease, creds, who.action.replace('{branch}', `${role}/${branch}`));
  };
}

/** This host's part in a cluster, or a refusal that says there is none. */
function clustered(flows: Workflows): NonNullable<Workflows['cluster']> {
  if (!flows.cluster) throw new UserError('this nasd serves its Homes alone: nasd.yaml has no cluster: block (docs/cluster.md)', 404);
  return flows.cluster;
}

/** What each route does once its caller may. */
function routes(flows: Workflows, web: WebLogins): Handlers {
  const { branches, trash, homes, memory, leases, prs, runs, history, maintenance, lifecycle, remotes } = flows;
  return {
    status: () => statusReport(homes, prs, remotes),

    listHomes: () => homes.listHomes(),
    createHome: ({ body: b }) => homes.createHome(b.role, b.template, b.owner ?? 'root'),

    listBranches: ({ params }) => branches.listBranches(params.role),
    createBranch: ({ params, body: b }) => branches.createBranch(params.role, b.branch, { from: b.from, ttl: b.ttl, run: b.run }),
    discardBranch: async ({ params: { role, branch } }) => {
      const result = await branches.discardBranch(role, branch);
      return { ...result, revokedLeases: await leases.revokeBranch(role, branch) };
    },
    extendBranch: ({ params: { role, branch }, body }) => branches.extendBranch(role, branch, body.ttl),
    updateBranch: ({ params: { role, branch }, creds }) => branches.updateBranch(role, branch, creds),
    resolveBranch: ({ params: { role, branch }, body: { path, take }, creds }) => branches.resolveBranch(role, branch, path, take, creds),
    sync: ({ params, body }) => branches.sync(params.role, body.branch),

    listTrash: ({ params, creds }) => trash.trashList(params.role, creds),
    restoreTrash: ({ params, body, creds }) => trash.trashRestore(params.role, body, creds),
    purgeTrash: ({ params, body }) => maintenance.purgeTrash(params.role, body.olderThan),

    listLeases: ({ params, creds }) => leases.list(params.role, creds),
    issueLease: ({ params, body: { branch, ...opts }, creds }) => leases.issue(params.role, branch, opts, creds),
    revokeLease: ({ params }) => leases.revoke(params.role, params.id),

    propose: ({ params, body: b, creds }) => prs.propose(params.role, b.branch, { intent: b.intent, checks: b.checks }, creds),
    listPrs: ({ params }) => prs.list(params.role),
    decisions: () => prs.decisions(),
    webLogin: () => web.login(),
    prStats: ({ params }) => prs.stats(params.role),
    // A PR id that is not a whole number is refused by the service, with what to do.
    showPr: ({ params, creds }) => prs.show(params.role, Number(params.id), creds),
    prFile: ({ params }) => prs.file(params.role, Number(params.id), params.side, params.path),
    approvePr: ({ params }) => prs.approve(params.role, Number(params.id)),
    rejectPr: ({ params, body }) => prs.reject(params.role, Number(params.id), body.why),
    revertPr: ({ params, creds }) => history.revert(params.role, Number(params.id), creds),

    memoryCheck: ({ params, body }) => memory.check(params.role, body.branch),
    memoryIndex: ({ params, body: b }) => memory.index(params.role, b.branch, b.check === true),
    memoryMeasure: ({ params, body }) => memory.measure(params.role, body.branch, body.tasks ?? []),
    memoryImport: ({ params, body }) => memory.import(params.role, body.branch, body.files),
    memoryReview: ({ params, body }) => memory.review(params.role, body.path, body.description),
    memoryShare: ({ params, body, creds }) => memory.share(params.role, body.path, body.to, creds),
    context: ({ params, body, creds }) => memory.context(params.role, body.branch, creds),
    briefing: ({ params, body, creds }) => memory.briefing(params.role, body.branch, body.maxTokens ?? 2000, creds),

    startRun: ({ params, body }) => runs.start(params.role, body),
    attachRun: ({ params, body }) => runs.attach(params.role, params.id, body),
    finishRun: ({ params, body, creds }) => runs.finish(params.role, params.id, body, creds),
    listRuns: ({ params, creds }) => runs.list(params.role, creds),
    pickRun: ({ params, body, creds }) => runs.pick(params.role, params.task, body.run, creds),

    createCheckpoint: ({ params, body, creds }) => history.create(params.role, body, creds),
    listCheckpoints: ({ params }) => history.list(params.role),
    deleteCheckpoint: ({ params }) => history.delete(params.role, params.name),
    restore: ({ params, body, creds }) => history.restore(params.role, body, creds),
    proposeConfig: ({ params, body, creds }) => history.proposeConfig(params.role, body, creds),
    log: ({ params, body, creds }) => history.log(params.role, body, creds),
    diff: ({ params, body, creds }) => history.diff(params.role, body, creds),
    maintenance: ({ body }) => maintenance.run(body.role),
    exportHome: ({ params, body }) => homes.exportHome(params.role, body.file),
    addRemote: ({ params, body }) => remotes.add(params.role, body.url),
    listRemotes: ({ params }) => remotes.list(params.role),
    removeRemote: ({ params, body }) => remotes.remove(params.role, body.url),
    clusterStatus: () => clustered(flows).status(),
    clusterVerify: ({ params }) => clustered(flows).verify(params.role),
    clusterLeave: () => clustered(flows).drain(),
    clusterJoin: () => clustered(flows).undrain(),
    moveBranch: ({ params, body }) => clustered(flows).moveBranch(params.role, params.branch, body.to, body.force ?? false),
    clusterWriter: ({ params, body }) => clustered(flows).moveWriter(params.role, body.to),
    archiveHome: ({ params }) => lifecycle.archive(params.role),
    unarchiveHome: ({ params }) => lifecycle.unarchive(params.role),
    retireHome: ({ params, body, creds }) => lifecycle.retire(params.role, body.successor, creds),
    importHome: ({ body }) => homes.importHome(body.file, body.as),
    why: ({ body, creds }) => flows.why.why(body, creds),
    adoptHome: ({ body: b, creds }) => lifecycle.adopt(b.role, b.source, b.owner ?? 'root', creds),
  };
}
