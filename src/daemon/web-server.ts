import http from 'node:http';
import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import { dispatch, readBody } from './control.js';
import type { Handlers } from './handlers.js';
import type { WebLogins } from './web-sessions.js';
import type { PrFileContent } from '../api/types.js';

/**
 * The Human Gate as a web page, served by nasd on 127.0.0.1 (web_listen). A session is the owner's: it is bought
 * with a one-time link from `nas web open`. The page calls the control API's own routes under /api (the same
 * handlers, the same rules as the CLI), only those the contract marks `web` (what it shows, a PR's files as plain
 * text, and the owner's decisions: approve, reject, revert, restore); every state change carries the session's CSRF
 * token. Nothing on the page is built from HTML strings of data: the script sets text, so names and intents show as
 * text; the Content-Security-Policy allows only the page's own script and style.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const ASSETS: Record<string, { file: string; type: string }> = {
  '/assets/app.js': { file: `${ROOT}/src/web/app.js`, type: 'text/javascript; charset=utf-8' },
  '/assets/home.js': { file: `${ROOT}/src/web/home.js`, type: 'text/javascript; charset=utf-8' },
  '/assets/app.css': { file: `${ROOT}/src/web/app.css`, type: 'text/css; charset=utf-8' },
  '/assets/diff2html.min.js': { file: `${ROOT}/node_modules/diff2html/bundles/js/diff2html.min.js`, type: 'text/javascript; charset=utf-8' },
  '/assets/diff2html.min.css': { file: `${ROOT}/node_modules/diff2html/bundles/css/diff2html.min.css`, type: 'text/css; charset=utf-8' },
};

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
};

const COOKIE = 'nas_session';

function cookieOf(req: http.IncomingMessage): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === COOKIE) return v.join('=');
  }
  return undefined;
}

/** Parse `host:port` (`off` or empty: not served). `setting`: its name, for the error. */
export function parseListen(listen: string, setting = 'web_listen'): { host: string; port: number } | null {
  if (!listen || listen === 'off') return null;
  const m = /^(.+):(\d{1,5})$/.exec(listen);
  if (!m || Number(m[2]) > 65535) throw new UserError(`${setting} "${listen}": give host:port (127.0.0.1:${setting === 'web_listen' ? 7465 : 9465}), or off`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}

/** What the page's requests are answered from. */
interface Site {
  table: Handlers;
  logins: WebLogins;
  log: Logger;
  /** index.html, its `{{csrf}}` filled in per session. */
  page: string;
  /** The names this server may be reached by (the port is known once it listens). */
  hosts: () => Set<string>;
}

export async function serveWeb(listen: string, table: Handlers, logins: WebLogins, log: Logger): Promise<http.Server | null> {
  const where = parseListen(listen);
  if (!where) return null;
  const page = await fs.readFile(`${ROOT}/src/web/index.html`, 'utf8').catch((err) => {
    log.warn({ err }, 'the web page\'s files are missing; nasd serves everything else');
    return null;
  });
  if (page === null) return null;
  let port = where.port;
  const hosts = () => new Set([`${where.host}:${port}`, `127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  const site: Site = { table, logins, log, page, hosts };
  const server = http.createServer((req, res) => void handle(site, req, res).catch((err) => {
    log.error({ err, url: req.url }, 'web request failed');
    if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'internal error (see nasd\'s log)');
  }));

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(where.port, where.host, () => resolve());
    });
  } catch (err) {
    log.warn({ err, listen }, 'the web page cannot listen there (web_listen); nasd serves everything else');
    return null;
  }
  port = (server.address() as { port: number }).port;
  // Bound to every address: the link names loopback (elsewhere, put a proxy in front: docs/guide.md, On a LAN).
  const local = where.host === '0.0.0.0' || where.host === '::' ? '127.0.0.1' : where.host;
  const host = local.includes(':') ? `[${local}]` : local;
  logins.base = `http://${host}:${port}`;
  log.info({ url: logins.base }, 'web page ready (nas web open prints a login link)');
  return server;
}

function send(res: http.ServerResponse, status: number, type: string, body: string | Buffer, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, ...extra });
  res.end(body);
}

/**
 * A file of a branch is shown as text, never as a page: plain text the browser may not sniff, in a sandbox (no
 * script, no origin) should it try, named for a save.
 */
function sendFile(res: http.ServerResponse, file: PrFileContent): void {
  const name = encodeURIComponent(path.posix.basename(file.path)).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  send(res, 200, 'text/plain; charset=utf-8', Buffer.from(file.content, 'base64'), {
    'content-disposition': `inline; filename*=UTF-8''${name}`,
    'content-security-policy': `${SECURITY_HEADERS['content-security-policy']}; sandbox`,
  });
}

/** One request: the assets, the login link, then only with a session: logout, the API, the page. */
async function handle(site: Site, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const { logins } = site;
  // A page on another site cannot reach this one through a name it controls (DNS rebinding).
  if (!site.hosts().has(req.headers.host ?? '')) return send(res, 421, 'text/plain; charset=utf-8', 'unknown host name: use the address nas web open prints');
  const url = new URL(req.url ?? '/', 'http://nasd');
  const asset = ASSETS[url.pathname];
  if (asset && req.method === 'GET') return send(res, 200, asset.type, await fs.readFile(asset.file), { 'cache-control': 'max-age=300' });
  if (url.pathname === '/login' && req.method === 'GET') {
    const got = logins.redeem(url.searchParams.get('token') ?? '');
    if (!got) return send(res, 401, 'text/html; charset=utf-8', loginPage('This login link has expired or was used already.'));
    const cookie = `${COOKIE}=${got.id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${logins.sessionSeconds}`;
    return send(res, 303, 'text/plain; charset=utf-8', 'logged in', { 'set-cookie': cookie, location: '/' });
  }
  const id = cookieOf(req);
  const session = logins.session(id);
  if (!session) {
    if (url.pathname.startsWith('/api/')) return send(res, 401, 'application/json', JSON.stringify({ ok: false, error: 'not logged in: run nas web open' }));
    return send(res, 401, 'text/html; charset=utf-8', loginPage());
  }
  if (req.method === 'POST') {
    // Every state change proves it comes from the page: its session's token (a proxy in front may change the
    // origin the browser sees, so the origin is not what decides).
    if (req.headers['x-csrf-token'] !== session.csrf) {
      return send(res, 403, 'application/json', JSON.stringify({ ok: false, error: 'refused: the request did not carry this session\'s CSRF token' }));
    }
  }
  if (url.pathname === '/logout' && req.method === 'POST') {
    logins.logout(id);
    return send(res, 200, 'application/json', JSON.stringify({ ok: true, result: null }), { 'set-cookie': `${COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0` });
  }
  if (url.pathname.startsWith('/api/')) return answerApi(site, req, res, url.pathname.slice(4));
  if (req.method === 'GET' && (url.pathname === '/' || /^\/(pr|home)\//.test(url.pathname))) {
    return send(res, 200, 'text/html; charset=utf-8', site.page.replace('{{csrf}}', session.csrf));
  }
  send(res, 404, 'text/plain; charset=utf-8', 'not found');
}

/** A logged-in session's call of a control API route (`route`: the path after /api), as the owner. */
async function answerApi(site: Site, req: http.IncomingMessage, res: http.ServerResponse, route: string): Promise<void> {
  let raw: unknown = {};
  try {
    if (req.method === 'POST') raw = await readBody(req);
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    return send(res, err.status, 'application/json', JSON.stringify({ ok: false, error: err.message }));
  }
  const started = process.hrtime.bigint();
  const answered = await dispatch(site.table, req.method ?? '', route, raw, { owner: true }, site.log, true);
  if (answered.route === 'prFile' && answered.payload.ok) return sendFile(res, answered.payload.result as PrFileContent);
  const body = JSON.stringify(answered.payload);
  const timing = { 'server-timing': `app;dur=${(Number(process.hrtime.bigint() - started) / 1e6).toFixed(1)}` };
  if (req.method !== 'GET' || answered.status !== 200) return send(res, answered.status, 'application/json', body, timing);
  // Polling is cheap: an answer that did not change is a 304 without a body.
  const etag = `"${createHash('sha1').update(body).digest('base64url')}"`;
  if (req.headers['if-none-match'] === etag) return send(res, 304, 'application/json', '', { ...timing, etag });
  return send(res, 200, 'application/json', body, { ...timing, etag });
}

function loginPage(why = ''): string {
  return '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Agent NAS</title>' +
    '<link rel="stylesheet" href="/assets/app.css"></head><body><main class="login"><h1>Agent NAS</h1>' +
    (why ? `<p>${why}</p>` : '') +
    '<p>Log in with a one-time link: run <code>sudo nas web open</code> on the NAS and open the address it prints.</p></main></body></html>';
}
