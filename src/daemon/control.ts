import http from 'node:http';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import { FsError, UserError } from '../util/errors.js';
import type { Registry } from './registry.js';
import type { MemoryService } from './memory-service.js';
import type { LeaseService } from './lease-service.js';
import type { PrService } from './pr-service.js';
import { credentialsOf, requireOwner, type Credentials } from './auth.js';

type Body = Record<string, unknown>;

/** Largest request body (imports carry file contents). */
const MAX_BODY = 8 << 20;
type Handler = (params: string[], body: Body, creds: Credentials) => Promise<unknown> | unknown;

export interface Services {
  memory: MemoryService;
  leases: LeaseService;
  prs: PrService;
  stateDir: string;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** The control API: JSON over HTTP on a unix socket. The nas CLI is its only client. */
export function routes(reg: Registry, { memory, leases, prs, stateDir }: Services): [string, RegExp, Handler][] {
  const int = (v: unknown, fallback: number) => (v === undefined ? fallback : Number(v));
  const list = (v: unknown) => (typeof v === 'string' ? v.split(',').map((x) => x.trim()).filter(Boolean) : undefined);
  const owner = (c: Credentials, action: string) => requireOwner(c, action, stateDir);
  // Writing into a branch needs a lease with write on it, or the owner (main refuses writes on its own).
  const writer = async (role: string, branch: string | undefined, c: Credentials, action: string) => {
    if (branch && branch !== 'main') await leases.authorize(role, branch, 'write', c, `${action} in ${role}/${branch}`);
  };
  return [
    ['GET', /^\/v1\/status$/, () => reg.status()],
    ['GET', /^\/v1\/homes$/, () => reg.listHomes()],
    ['POST', /^\/v1\/homes$/, (_p, b, c) => (owner(c, 'creating a Home'), reg.createHome(String(b.role ?? ''), str(b.template), str(b.owner) ?? 'root'))],
    ['GET', /^\/v1\/homes\/([^/]+)\/branches$/, ([role]) => reg.listBranches(role)],
    ['POST', /^\/v1\/homes\/([^/]+)\/branches$/, ([role], b, c) =>
      (owner(c, 'creating a branch'), reg.createBranch(role, String(b.branch ?? ''), { from: str(b.from), ttl: str(b.ttl), run: str(b.run) }))],
    ['POST', /^\/v1\/homes\/([^/]+)\/sync$/, ([role], b) => reg.sync(role, str(b.branch))],
    ['GET', /^\/v1\/homes\/([^/]+)\/trash$/, ([role]) => reg.trashList(role)],
    ['POST', /^\/v1\/homes\/([^/]+)\/trash\/restore$/, async ([role], b, c) => {
      const restore = { path: str(b.path), id: str(b.id), branch: str(b.branch), to: str(b.to) };
      await writer(role, await reg.trashTarget(role, restore), c, 'restoring from the recycle area');
      return reg.trashRestore(role, restore);
    }],
    ['POST', /^\/v1\/homes\/([^/]+)\/memory\/check$/, ([role], b) => memory.check(role, str(b.branch))],
    ['POST', /^\/v1\/homes\/([^/]+)\/memory\/index$/, async ([role], b, c) => {
      if (b.check !== true) await writer(role, str(b.branch), c, 'regenerating indexes');
      return memory.index(role, str(b.branch), b.check === true);
    }],
    ['POST', /^\/v1\/homes\/([^/]+)\/memory\/measure$/, ([role], b) =>
      memory.measure(role, str(b.branch), Array.isArray(b.tasks) ? b.tasks.map(String) : [])],
    ['POST', /^\/v1\/homes\/([^/]+)\/memory\/import$/, async ([role], b, c) => {
      await writer(role, str(b.branch), c, 'importing notes');
      const files = Array.isArray(b.files) ? b.files.map((f: any) => ({ name: String(f?.name ?? ''), content: String(f?.content ?? '') })) : [];
      return memory.import(role, str(b.branch), files);
    }],
    ['POST', /^\/v1\/homes\/([^/]+)\/memory\/review$/, ([role], b, c) => memory.review(role, String(b.path ?? ''), str(b.description), c)],
    ['POST', /^\/v1\/homes\/([^/]+)\/context$/, ([role], b) => memory.context(role, str(b.branch))],
    ['POST', /^\/v1\/homes\/([^/]+)\/briefing$/, ([role], b) => memory.briefing(role, str(b.branch), int(b.maxTokens, 2000))],
    ['GET', /^\/v1\/homes\/([^/]+)\/leases$/, ([role]) => leases.list(role)],
    ['POST', /^\/v1\/homes\/([^/]+)\/leases$/, ([role], b, c) =>
      leases.issue(role, String(b.branch ?? ''), { principal: str(b.principal), ttl: str(b.ttl), scopes: str(b.scopes), budget: b.budget === undefined ? undefined : Number(b.budget) }, c)],
    ['POST', /^\/v1\/homes\/([^/]+)\/leases\/([^/]+)\/revoke$/, ([role, id], _b, c) => leases.revoke(role, id, c)],
    ['POST', /^\/v1\/homes\/([^/]+)\/branches\/([^/]+)\/discard$/, async ([role, branch], _b, c) => {
      await leases.authorize(role, branch, 'write', c, `discarding ${role}/${branch}`);
      const result = await reg.discardBranch(role, branch);
      return { ...result, revokedLeases: await leases.revokeBranch(role, branch) };
    }],
    ['POST', /^\/v1\/homes\/([^/]+)\/prs$/, ([role], b, c) => prs.propose(role, String(b.branch ?? ''), { intent: str(b.intent), checks: list(b.checks) }, c)],
    ['GET', /^\/v1\/homes\/([^/]+)\/prs$/, ([role]) => prs.list(role)],
    ['GET', /^\/v1\/homes\/([^/]+)\/prs\/stats$/, ([role]) => prs.stats(role)],
    ['GET', /^\/v1\/homes\/([^/]+)\/prs\/([^/]+)$/, ([role, id]) => prs.show(role, Number(id))],
    ['POST', /^\/v1\/homes\/([^/]+)\/prs\/([^/]+)\/approve$/, ([role, id], _b, c) => prs.approve(role, Number(id), c)],
    ['POST', /^\/v1\/homes\/([^/]+)\/prs\/([^/]+)\/reject$/, ([role, id], b, c) => prs.reject(role, Number(id), str(b.why), c)],
  ];
}

async function readBody(req: http.IncomingMessage): Promise<Body> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) throw new UserError(`request over ${MAX_BODY >> 20} MiB; send less at a time`, 413);
    chunks.push(chunk);
  }
  if (size === 0) return {};
  try {
    const body = JSON.parse(Buffer.concat(chunks).toString());
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new Error('not an object');
    return body as Body;
  } catch {
    throw new UserError('request body is not a JSON object');
  }
}

/** Remove a socket file left by a dead daemon; refuse if a live one answers there. */
async function claimSocket(socket: string): Promise<void> {
  await fs.mkdir(path.dirname(socket), { recursive: true });
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

export async function serveControl(
  socket: string, reg: Registry, services: Services, ownerToken: string, group: string | null, log: Logger,
): Promise<http.Server> {
  const table = routes(reg, services);
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://nasd');
    const reply = (status: number, payload: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    try {
      for (const [method, re, handler] of table) {
        const m = re.exec(url.pathname);
        if (!m || req.method !== method) continue;
        const body = await readBody(req);
        const params = m.slice(1).map(decodeURIComponent);
        return reply(200, { ok: true, result: await handler(params, body, credentialsOf(req, ownerToken)) });
      }
      reply(404, { ok: false, error: `no such endpoint: ${req.method} ${url.pathname}` });
    } catch (err) {
      if (err instanceof UserError) return reply(err.status, { ok: false, error: err.message });
      if (err instanceof FsError) return reply(409, { ok: false, error: `${err.message} (${err.code})` });
      log.error({ err, url: url.pathname }, 'control request failed');
      reply(500, { ok: false, error: `internal error: ${(err as Error).message} (see nasd's log)` });
    }
  });
  await claimSocket(socket);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => resolve());
  });
  await fs.chmod(socket, 0o660);
  if (group !== null && group !== undefined) await fs.chown(socket, -1, await groupId(String(group)));
  log.info({ socket }, 'control socket ready');
  return server;
}
