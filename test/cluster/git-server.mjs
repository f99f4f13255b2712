#!/usr/bin/env node
// A stand-in for an operator's git forge in the cluster tests: every bare repository under --root, served over
// smart HTTP by `git http-backend` run as CGI, one process per request. No dependencies, no authentication:
// it listens on loopback only in the tests.
//
//   node test/cluster/git-server.mjs --root DIR --listen 127.0.0.1:PORT [--token TOKEN]
//
// With --token, a request without `Authorization: Bearer TOKEN` (nasd's cluster.git.token_file) is answered 401.
// PORT 0 picks a free port. Once it accepts connections it prints `listening <port>` on stdout.
// Repositories are not created on demand (a forge makes them when the operator asks): `git init --bare`
// them under the root first (harness.ts createRepo).
import { execFileSync, spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';

function usage(msg) {
  process.stderr.write(`git-server: ${msg}\nusage: node git-server.mjs --root DIR --listen HOST:PORT [--token TOKEN]\n`);
  process.exit(2);
}

let root;
let listen;
let token;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--root') root = argv[++i];
  else if (argv[i] === '--listen') listen = argv[++i];
  else if (argv[i] === '--token') token = argv[++i];
  else usage(`unknown argument ${argv[i]}`);
}
if (!root || !listen) usage('--root and --listen are required');
root = path.resolve(root);
const colon = listen.lastIndexOf(':');
if (colon < 0) usage('--listen takes HOST:PORT');
const host = listen.slice(0, colon);
const port = Number(listen.slice(colon + 1));

// Server-side git configuration, given to every CGI through the environment so the repositories need none:
// - http.receivepack: http-backend refuses pushes from an unauthenticated client (no REMOTE_USER) unless it is set.
// - uploadpack.allowReachableSHA1InWant: lets a protocol v0 client fetch a commit by its id when some ref reaches
//   it (protocol v2's upload-pack does not check wants against the refs at all).
const serverConfig = [
  ['http.receivepack', 'true'],
  ['uploadpack.allowReachableSHA1InWant', 'true'],
  // - receive.autogc: receive-pack starts `git gc --auto` after every push; a forge runs its housekeeping on its own.
  ['receive.autogc', 'false'],
];

const baseEnv = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  // The CGI sees this configuration only: not the host's /etc/gitconfig, not the test user's ~/.gitconfig.
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  HOME: root,
  GIT_PROJECT_ROOT: root,
  GIT_HTTP_EXPORT_ALL: '1',
  GIT_CONFIG_COUNT: String(serverConfig.length),
};
serverConfig.forEach(([key, value], i) => {
  baseEnv[`GIT_CONFIG_KEY_${i}`] = key;
  baseEnv[`GIT_CONFIG_VALUE_${i}`] = value;
});

// git-http-backend itself, not `git http-backend`: the git wrapper would start it as a child of its own, two
// processes per request instead of one (a push or a fetch is two or three requests).
const httpBackend = path.join(execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim(), 'git-http-backend');

/** CGIs in flight: ended with the server, so a stopped server leaves no git behind. */
const cgis = new Set();

function handle(req, res) {
  if (token !== undefined && req.headers.authorization !== `Bearer ${token}`) {
    req.resume();
    res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"', 'Content-Type': 'text/plain' }).end('a token is required\n');
    return;
  }
  const q = req.url.indexOf('?');
  let pathInfo;
  try {
    pathInfo = decodeURIComponent(q < 0 ? req.url : req.url.slice(0, q));
  } catch {
    res.writeHead(400).end('bad path\n');
    return;
  }
  const env = {
    ...baseEnv,
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
    REQUEST_METHOD: req.method,
    PATH_INFO: pathInfo,
    QUERY_STRING: q < 0 ? '' : req.url.slice(q + 1),
    REMOTE_ADDR: req.socket.remoteAddress ?? '',
  };
  if (req.headers['content-type']) env.CONTENT_TYPE = req.headers['content-type'];
  // A chunked body (git sends large pushes so) has no length: http-backend then reads its stdin to the end.
  if (req.headers['content-length']) env.CONTENT_LENGTH = req.headers['content-length'];
  if (req.headers['content-encoding']) env.HTTP_CONTENT_ENCODING = req.headers['content-encoding'];
  if (req.headers['git-protocol']) env.GIT_PROTOCOL = req.headers['git-protocol'];

  const cgi = spawn(httpBackend, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  cgis.add(cgi);
  cgi.on('exit', () => cgis.delete(cgi));
  cgi.on('error', (err) => {
    process.stderr.write(`git-server: git http-backend: ${err.message}\n`);
    if (!res.headersSent) res.writeHead(500).end();
  });
  cgi.stderr.on('data', (d) => process.stderr.write(d));
  cgi.stdin.on('error', () => undefined); // http-backend may answer (an error) without reading the body
  req.pipe(cgi.stdin);
  // A client that goes away mid-request: its git need not finish.
  res.on('close', () => {
    if (!res.writableFinished && cgi.exitCode === null && cgi.signalCode === null) cgi.kill('SIGTERM');
  });

  // The CGI answers with a header block (Status:, Content-Type:, ...), a blank line, then the body.
  let head = Buffer.alloc(0);
  let inBody = false;
  // A slow reader holds the CGI back rather than the pack piling up in memory here.
  const send = (chunk) => {
    if (!res.write(chunk)) {
      cgi.stdout.pause();
      res.once('drain', () => cgi.stdout.resume());
    }
  };
  cgi.stdout.on('data', (chunk) => {
    if (inBody) {
      send(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const text = head.toString('latin1');
    const crlf = text.indexOf('\r\n\r\n');
    const lf = text.indexOf('\n\n');
    const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 4 : lf >= 0 ? lf + 2 : -1;
    if (end < 0) return;
    let status = 200;
    let reason;
    const headers = {};
    for (const line of text.slice(0, end).split(/\r?\n/)) {
      const c = line.indexOf(':');
      if (c <= 0) continue;
      const name = line.slice(0, c).trim();
      const value = line.slice(c + 1).trim();
      if (name.toLowerCase() === 'status') {
        status = parseInt(value, 10) || 500;
        reason = value.replace(/^\d+\s*/, '') || undefined;
      } else headers[name] = value;
    }
    res.writeHead(status, reason, headers);
    inBody = true;
    if (head.length > end) send(head.subarray(end));
    head = Buffer.alloc(0);
  });
  cgi.stdout.on('end', () => {
    if (!inBody && !res.headersSent) res.writeHead(502).end('git http-backend gave no answer\n');
    else res.end();
  });
}

const server = http.createServer(handle);
server.on('error', (err) => {
  process.stderr.write(`git-server: ${err.message}\n`);
  process.exit(1);
});
server.listen(port, host, () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

// Stopped (the "forge is down" scenarios): close at once, connections and CGIs in flight included.
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    server.close();
    server.closeAllConnections();
    for (const cgi of cgis) cgi.kill('SIGKILL');
    process.exit(0);
  });
}
