// The web page benchmark (issue 13). Run as root after `npm run build`, with Debian's chromium installed:
//   node bench/web.mjs [--homes 10] [--prs 100] [--files 1000]
//  1. the decision inbox with homes x prs PRs (a third waiting, the rest merged): server time (Server-Timing)
//     and the whole request over loopback, p50 of 20; target < 300 ms server time;
//  2. a PR page whose diff has --files files, in chromium: time to the first page of the diff, time to page to
//     the next 25 files, and the longest main-thread task (the page must not freeze).
// PR records are written straight into the Stores before nasd starts (proposing 1,000 PRs would take minutes of checks).
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const HOMES = opt('--homes', 10);
const PRS = opt('--prs', 100);
const FILES = opt('--files', 1000);
const { Home } = await import(`${ROOT}/dist/src/home/home.js`);
const { PrStore } = await import(`${ROOT}/dist/src/merge/pr-store.js`);
const { MODE } = await import(`${ROOT}/dist/src/store/store.js`);
const { client } = await import(`${ROOT}/dist/src/api/client.js`);
const { chromium } = await import('playwright-core');

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bench-web-'));
const state = `${dir}/state`;
const identity = { name: 'bench', email: 'bench@x' };
const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** A PR record as nasd files one. */
function record(role, i, head, base, files) {
  const now = new Date(Date.now() - (PRS - i) * 60_000).toISOString();
  const waiting = i % 3 === 0;
  return {
    home: role, branch: `run-${i}`, target: 'main', state: waiting ? 'waiting' : 'merged', intent: `task ${i} of ${role}: update the notes`,
    created: now, updated: now, head, base, target_head: base,
    provenance: { principal: 'agent', run: `r${i}`, reads: 3, reads_digest: 'sha256:0' },
    changes: { added: 0, modified: files.length, deleted: 0, paths: files.slice(0, 50).map((f) => `M ${f}`) },
    checks: [{ name: 'links', ok: true, ms: 1, output: '' }, { name: 'schema', ok: true, ms: 2, output: '' }],
    trust: { notes_changed: [], unreviewed: [], reviewed_claims: [], start_set: waiting ? ['AGENTS.md'] : [] },
    reasons: waiting ? ['changes what agents load at session start: AGENTS.md'] : [],
    ...(waiting ? {} : { merged: { commit: head, at: now, by: 'policy' } }),
  };
}

let bigPr;
for (let h = 0; h < HOMES; h++) {
  const role = `h${h}`;
  const home = await Home.create(state, role, { owner: 'root', identity });
  const main = await home.mainHead();
  const mainTree = (await home.store.readCommit(main)).tree;
  const prs = new PrStore(home.store, identity);
  if (h === 0) {
    // One PR whose diff touches FILES files: main holds them, the PR's head rewrites each.
    const blob = async (text) => ({ oid: await home.store.writeBlob(text), mode: MODE.file });
    const names = Array.from({ length: FILES }, (_, i) => `outbox/d${Math.floor(i / 100)}/f${i}.md`);
    const before = new Map(await Promise.all(names.map(async (n, i) => [n, await blob(`# ${n}\n\nline one ${i}\nline two ${i}\n`)])));
    const baseCommit = await home.store.commitChanges('refs/heads/main', { head: main, changes: before, message: 'seed', author: identity });
    const after = new Map(await Promise.all(names.map(async (n, i) => [n, await blob(`# ${n}\n\nline one ${i}\nline two ${i}, changed\n`)])));
    const headTree = await home.store.editTree((await home.store.readCommit(baseCommit)).tree, after);
    const head = await home.store.writeCommit({ tree: headTree, parents: [baseCommit], message: 'rewrite', author: identity });
    bigPr = (await prs.create({ ...record(role, 0, head, baseCommit, names), state: 'waiting', intent: `rewrite ${FILES} files` }, '')).id;
  }
  for (let i = 0; i < PRS; i++) await prs.create(record(role, i, main, main, ['outbox/README.md']), 'x outbox/README.md\n');
  void mainTree;
}

const socket = `${dir}/nasd.sock`;
const daemon = spawn(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, '--state-dir', state, '--mount', `${dir}/mnt`, '--socket', socket,
  '--log-level', 'warn', '--web-listen', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'inherit'] });
let server;
const rows = [];
try {
  for (let i = 0; i < 300 && !(await fs.stat(socket).catch(() => null)); i++) await new Promise((r) => setTimeout(r, 50));
  const call = client({ socket, headers: { 'x-nas-owner': (await fs.readFile(`${state}/owner.token`, 'utf8')).trim() } });
  const { url } = await call('webLogin', {}, {});
  const base = new URL(url).origin;
  server = await chromium.launchServer({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const browser = await chromium.connect(server.wsEndpoint());
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await page.goto(url);
  const cookie = (await page.context().cookies()).find((c) => c.name === 'nas_session').value;

  // 1. The inbox's data, as the page asks for it.
  const serverMs = [];
  const wallMs = [];
  let count = 0;
  for (let i = 0; i < 20; i++) {
    const t = process.hrtime.bigint();
    const res = await fetch(`${base}/api/v1/decisions`, { headers: { cookie: `nas_session=${cookie}` } });
    const body = await res.json();
    wallMs.push(Number(process.hrtime.bigint() - t) / 1e6);
    serverMs.push(Number(/dur=([\d.]+)/.exec(res.headers.get('server-timing'))[1]));
    count = body.result.length;
  }
  rows.push([`decision inbox, ${HOMES * PRS + 1} PRs in ${HOMES} Homes (${count} to decide): server`, `${p50(serverMs).toFixed(1)} ms`, '< 300 ms', p50(serverMs) < 300 ? 'yes' : 'NO']);
  rows.push(['  the same, whole request over loopback', `${p50(wallMs).toFixed(1)} ms`, '', '']);
  const t0 = Date.now();
  await page.goto(`${base}/`);
  await page.waitForSelector('.card');
  rows.push(['  inbox page in chromium, load to cards shown', `${Date.now() - t0} ms`, '', '']);

  // 2. The big PR page. Long tasks (over 50 ms on the main thread) are read from the page's buffered timeline.
  const longestTask = () => page.evaluate(() => new Promise((resolve) => {
    let longest = 0;
    new PerformanceObserver((list) => list.getEntries().forEach((e) => (longest = Math.max(longest, e.duration)))).observe({ type: 'longtask', buffered: true });
    setTimeout(() => resolve(longest), 200);
  }));
  const t1 = Date.now();
  await page.goto(`${base}/pr/h0/${bigPr}`);
  await page.waitForSelector('.d2h-file-wrapper');
  const firstPage = Date.now() - t1;
  const t2 = Date.now();
  await page.locator('.pager button', { hasText: 'next' }).click();
  await page.waitForFunction(() => document.querySelector('.pager span')?.textContent.includes('files 26'));
  const nextPage = Date.now() - t2;
  const longest = await longestTask();
  const shown = await page.locator('.d2h-file-wrapper').count();
  const rowsShown = await page.locator('table.files tbody tr').count();
  rows.push([`PR page, ${FILES}-file diff: load to first ${shown} files shown`, `${firstPage} ms`, 'no freeze', '']);
  rows.push(['  next page of 25 files', `${nextPage} ms`, '', '']);
  rows.push(['  file table rows drawn (the rest on request)', String(rowsShown), '', '']);
  rows.push(['  longest main-thread task seen', `${longest.toFixed(0)} ms`, '< 1000 ms', longest < 1000 ? 'yes' : 'NO']);
  await browser.close();
} finally {
  const pid = server?.process().pid;
  await server?.close().catch(() => undefined);
  if (pid) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.once('exit', r));
  await fs.rm(dir, { recursive: true, force: true });
}

const head = ['workload', 'measured', 'target', 'met'];
const widths = head.map((_, i) => Math.max(...[head, ...rows].map((r) => String(r[i]).length)));
for (const r of [head, ...rows]) console.log(r.map((c, i) => String(c).padEnd(widths[i])).join('  '));
