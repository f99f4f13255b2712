import http from 'node:http';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import { FsError, UserError, isDiskFull } from '../util/errors.js';
import { ROUTES, type Params, type Result, type RouteName, type RouteSpec } from '../api/contract.js';
import { matchRoute } from '../api/paths.js';
import { validateBody } from '../api/validate.js';
import { credentialsOf } from './auth.js';
import type { Credentials, RunCaller } from '../api/credentials.js';
import type { Handlers } from './handlers.js';
import { mkdirExact } from '../util/exact-mode.js';

/**
 * The control API's transport: JSON over HTTP on a unix socket (the nas CLI is its only client). A request
 * is matched to a route of the contract, its body validated, and the route's handler answers.
 */


/** Largest request body (imports carry file contents). */
const MAX_BODY = 8 << 20;

export async function readBody(req: http.IncomingMessage): Promise<unknown> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) throw new UserError(`request over ${MAX_BODY >> 20} MiB; send less at a time`, 413);
    chunks.push(chunk);
  }
  if (size === 0) return {};
  try {
    return JSON.parse(Buffer.concat(chunks).toString());
  } catch {
    // Whether it parses or not, what is not an object is refused with the same words (validate.ts).
    return null;
  }
}

/** One route's answer: its body checked against the contract, then its handler (behind who may call it: handlers.ts). */
async function answer<K extends RouteName>(table: Handlers, route: K, params: Params<K>, raw: unknown, creds: Credentials): Promise<Result<K>> {
  const body = validateBody(route, raw);
  return table[route]({ params, body, creds });
}

/** Remove a socket file left by a dead daemon; refuse if a live one answers there. */
async function claimSocket(socket: string): Promise<void> {
  // The socket's group reaches it through its directory: 0755 for what nasd makes (its umask would keep it its own).
  await mkdirExact(path.dirname(socket), 0o755);
  const alive = await new Promise<boolean>((resolve) => {
    const c = net.connect(socket);
    c.once('connect', () => (c.end(), resolve(true)));
    c.once('error', () => resolve(false));
  });
  if (alive) throw new UserError(`another nasd is listening on ${socket}; stop it or pass --socket`);
  await fs.rm(socket, { force: true });
}

/** A group name (from /etc/group) or a numeric gid. */
async function groupId(group: string): Promise<number> {
  if (/^\d+$/.test(group)) return Number(group);
  const text = await fs.readFile('/etc/group', 'utf8').catch(() => '');
  const line = text.split('\n').find((l) => l.split(':')[0] === group);
  if (!line) throw new UserError(`socket_group: no group named "${group}" (create it with groupadd, or give a gid)`);
  return Number(line.split(':')[2]);
}

type Listener = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** What a caller is told when the disk is full (a commit could not be written), instead of "internal error". */
const DISK_FULL = 'the disk that holds nasd\'s state directory is full, so this could not be done: free space there and try again ' +
  '(what was written is kept on disk and committed once there is room; nothing is lost)';

/** A request's answer on the wire: the HTTP status and `{ ok, result | error }`. */
interface Answered {
  status: number;
  /** The route that answered (the web page serves a file's content as the file, not as JSON). */
  route?: RouteName;
  payload: { ok: true; result: unknown } | { ok: false; error: string };
}

/**
 * Route, validate and answer one request of the contract, whatever carried it (the control socket, or the web
 * page's session, which reaches only the routes the contract marks `web`): errors become a status and a message
 * that says what to do, never an exception.
 */
export async function dispatch(
  table: Handlers, method: string, pathname: string, raw: unknown, creds: Credentials, log: Logger, web = false,
): Promise<Answered> {
  try {
    const route = matchRoute(method, pathname);
    const spec: RouteSpec | undefined = route && ROUTES[route.name];
    if (!route || (web && !spec?.web)) return { status: 404, payload: { ok: false, error: `no such endpoint: ${method} ${pathname}` } };
    // The matcher named the parameters after this route's own pattern.
    const params = route.params as Params<typeof route.name>;
    return { status: 200, route: route.name, payload: { ok: true, result: await answer(table, route.name, params, raw, creds) } };
  } catch (err) {
    if (err instanceof UserError) return { status: err.status, payload: { ok: false, error: err.message } };
    if (isDiskFull(err)) {
      log.warn({ url: pathname, why: (err as Error).message }, 'the disk that holds the state directory is full');
      return { status: 507, payload: { ok: false, error: DISK_FULL } };
    }
    if (err instanceof FsError) return { status: 409, payload: { ok: false, error: `${err.message} (${err.code})` } };
    log.error({ err, url: pathname }, 'control request failed');
    return { status: 500, payload: { ok: false, error: `internal error: ${(err as Error).message} (see nasd's log)` } };
  }
}

/**
 * The request listener: route, validate, answer. On a run's socket the owner credential counts for nothing, and
 * the request is the run's.
 */
function listener(table: Handlers, ownerToken: string, log: Logger, run?: RunCaller): Listener {
  return async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://nasd');
    let answered: Answered;
    try {
      const body = await readBody(req);
      const creds = credentialsOf(req, ownerToken);
      if (run) Object.assign(creds, { owner: false, run });
      answered = await dispatch(table, req.method ?? '', url.pathname, body, creds, log);
    } catch (err) {
      answered = err instanceof UserError ? { status: err.status, payload: { ok: false, error: err.message } } : { status: 400, payload: { ok: false, error: (err as Error).message } };
    }
    res.writeHead(answered.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answered.payload));
  };
}

async function listen(socket: string, onRequest: Listener): Promise<http.Server> {
  const server = http.createServer(onRequest);
  await claimSocket(socket);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => resolve());
  });
  return server;
}

/**
 * Each run's own control socket (nas run): owned by the run's user, so its processes reach nasd without
 * joining the socket's group; the same API, but no owner action is taken on it whatever a request carries.
 */
export class RunSockets {
  listenerFor?: (run: RunCaller) => Listener;

  async open(socket: string, run: RunCaller): Promise<{ close(): Promise<void> }> {
    if (!this.listenerFor) throw new Error('the control socket is not served yet');
    const server = await listen(socket, this.listenerFor(run));
    await fs.chmod(socket, 0o600);
    await fs.lchown(socket, run.uid, run.gid);
    return {
      close: () => new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        void fs.rm(socket, { force: true });
      }),
    };
  }
}

export async function serveControl(
  socket: string, table: Handlers, ownerToken: string, group: string | null, log: Logger, runSockets?: RunSockets,
): Promise<http.Server> {
  if (runSockets) runSockets.listenerFor = (run) => listener(table, ownerToken, log, run);
  const server = await listen(socket, listener(table, ownerToken, log));
  await fs.chmod(socket, 0o660);
  if (group !== null && group !== undefined) await fs.chown(socket, -1, await groupId(String(group)));
  log.info({ socket }, 'control socket ready');
  return server;
}
