import http from 'node:http';
import { ROUTES, type Body, type Params, type Reply, type Result, type RouteName } from './contract.js';
import { fillPath } from './paths.js';

/** The typed client of the control API: one call per route, its answer typed by the contract. */

/** Where nasd serves the control API unless told otherwise (the CLI without loading the daemon's config). */
export const DEFAULT_SOCKET = '/run/agent-nas/nasd.sock';

/** nasd's refusal: its message, and the HTTP status (400 bad input, 403 not allowed, 404 no such thing, 409 conflict). */
export class ApiError extends Error {
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

/** One request; `extra` headers join the client's for this call only (nas run sends the run's lease so). */
export type Call = <K extends RouteName>(route: K, params: Params<K>, body: Body<K>, extra?: Record<string, string>) => Promise<Result<K>>;

export interface ClientOptions {
  socket: string;
  /** Sent with every request (the credentials: X-Nas-Lease, X-Nas-Owner). */
  headers: Record<string, string>;
}

function request(socket: string, method: string, path: string, headers: Record<string, string>, payload?: string): Promise<{ status: number; text: string }> {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request({ socketPath: socket, method, path, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(payload);
  }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
      throw new Error(`nasd is not running (nothing answers on ${socket}). Start it with: systemctl start nasd, or scripts/mount.sh`);
    }
    if (err.code === 'EACCES') throw new Error(`no permission to use ${socket}: run nas as root or a member of the socket's group`);
    throw err;
  });
}

/** A call function bound to one socket; an answer with ok: false becomes an Error with the daemon's message. */
export function client({ socket, headers }: ClientOptions): Call {
  return async <K extends RouteName>(route: K, params: Params<K>, body: Body<K>, extra: Record<string, string> = {}): Promise<Result<K>> => {
    const { method } = ROUTES[route];
    // GET carries no body; a POST with nothing to say sends none either.
    const payload = method === 'GET' || Object.keys(body).length === 0 ? undefined : JSON.stringify(body);
    const { status, text } = await request(socket, method, fillPath(route, params), { ...headers, ...extra }, payload);
    let reply: Reply<K>;
    try {
      reply = JSON.parse(text) as Reply<K>;
    } catch {
      throw new Error(`nasd answered ${status} with something that is not JSON`);
    }
    if (!reply.ok) throw new ApiError(reply.error ?? `nasd answered ${status}`, status);
    return reply.result;
  };
}
