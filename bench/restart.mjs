// A restart clients do not see: how long requests wait, and whether any fails, while nasd restarts keeping its
// kernel connection. Run as root after `npm run build`:
//   node bench/restart.mjs [--cycles 5] [--branches 20] [--json FILE] [--keep-log FILE]
// nasd runs under test/fixtures/fd-store.py, a stand-in for systemd's file descriptor store (NOTIFY_SOCKET,
// FDSTORE=1; SIGHUP restarts nasd as `systemctl restart` does, the stored /dev/fuse descriptor handed to the new
// one). A demo Home with N branches, each with files written through the mount (and its workspace/ bind). Per
// cycle: a file left pending in one branch (the stop commits it), the kernel's caches dropped, then a prober in a
// child process of its own stats, round robin over the branches, a file the kernel has forgotten (its lookup
// reaches nasd) and a name never seen (ENOENT, answered by nasd), timing every call; SIGHUP; once the new nasd is
// ready and a moment more, the prober stops and says its longest call and any error (ENOENT on the new name is
// the expected answer; anything else, ENOTCONN above all, is an error).
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const CYCLES = Number(opt('--cycles', 5));
const BRANCHES = Number(opt('--branches', 20));
const FILES = 50; // per branch: the prober reaches a forgotten one each call
const JSON_OUT = opt('--json', null);
const KEEP_LOG = opt('--keep-log', null); // nasd's log is written here when a stat failed

// The prober: a child process, so no stat ever blocks a process that the mount's answers depend on.
const PROBER = `
const fs = require('node:fs/promises');
const [mnt, branches, files] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
let stop = false, calls = 0, errors = [], max = 0, maxAt = 0, i = 0;
const t0 = process.hrtime.bigint();
const now = () => Number(process.hrtime.bigint() - t0) / 1e6;
process.stdin.on('end', () => (stop = true));
process.stdin.resume();
async function probe(p, expect) {
  const t = now();
  let code = 'ok';
  try { await fs.lstat(p); } catch (e) { code = e.code; }
  const took = now() - t;
  calls++;
  if (took > max) { max = took; maxAt = t; }
  if (code !== expect) errors.push({ path: p, code, at: Math.round(t) });
}
(async () => {
  process.stdout.write('probing\\n');
  while (!stop) {
    const b = i % branches, f = Math.floor(i / branches) % files;
    await probe(mnt + '/demo@b' + b + '/outbox/f' + f + '.md', 'ok');
    await probe(mnt + '/demo@b' + b + '/outbox/never-' + process.pid + '-' + i, 'ENOENT');
    i++;
  }
  process.stdout.write(JSON.stringify({ calls, maxMs: max, maxAtMs: maxAt, errors: errors.length, firstErrors: errors.slice(0, 5), endMs: now() }) + '\\n');
})();
`;

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bench-restart-'));
const state = `${dir}/state`;
const mnt = `${dir}/mnt`;
const socket = `${dir}/nasd.sock`;
const cli = (...a) =>
  execFileSync(process.execPath, [`${ROOT}/dist/src/cli/main.js`, '--socket', socket, ...a], {
    env: { ...process.env, NAS_OWNER_TOKEN_FILE: `${state}/owner.token`, NAS_LEASE: '' },
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ms = (t) => Number(process.hrtime.bigint() - t) / 1e6;

let store = null;
let log = '';
const count = (s) => log.split(s).length - 1;

async function until(cond, what, timeoutMs = 60_000) {
  const t = Date.now();
  while (!cond()) {
    if (store.exitCode !== null) throw new Error(`the fd store exited (${store.exitCode}) waiting for ${what}:\n${log.slice(-4000)}`);
    if (Date.now() - t > timeoutMs) throw new Error(`no ${what} after ${timeoutMs} ms:\n${log.slice(-4000)}`);
    await sleep(5);
  }
}

function dropCaches() {
  execFileSync('sync');
  writeFileSync('/proc/sys/vm/drop_caches', '3');
}

async function cycle(c) {
  // Something pending in one branch: the stop commits it.
  await fs.writeFile(`${mnt}/demo@b0/outbox/cycle.md`, `cycle ${c}\n`);
  dropCaches();
  const prober = spawn(process.execPath, ['-e', PROBER, mnt, String(BRANCHES), String(FILES)], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  prober.stdout.on('data', (d) => (out += d));
  const exited = new Promise((r) => prober.once('exit', r));
  while (!out.includes('probing\n')) {
    if (prober.exitCode !== null) throw new Error('the prober exited');
    await sleep(5);
  }
  await sleep(300);
  const readies = count('"nasd ready"');
  const takeovers = count('took the kernel connection over');
  const t = process.hrtime.bigint();
  process.kill(store.pid, 'SIGHUP');
  await until(() => count('"nasd ready"') > readies, 'nasd ready again');
  const away = ms(t);
  await sleep(500);
  prober.stdin.end();
  await exited;
  const r = JSON.parse(out.trim().split('\n').pop());
  return { awayMs: away, kept: count('took the kernel connection over') > takeovers, ...r };
}

let results;
try {
  store = spawn(
    'python3',
    [`${ROOT}/test/fixtures/fd-store.py`, process.execPath, `${ROOT}/dist/src/daemon/main.js`, '--state-dir', state, '--mount', mnt, '--socket', socket,
      '--demo', '--web-listen', 'off', '--log-level', 'info'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  store.stdout.on('data', (d) => (log += d));
  store.stderr.on('data', (d) => (log += d));
  await until(() => count('"nasd ready"') > 0, 'nasd ready');
  for (let i = 0; i < BRANCHES; i++) {
    cli('branch', 'create', `demo/b${i}`);
    for (let f = 0; f < FILES; f++) await fs.writeFile(`${mnt}/demo@b${i}/outbox/f${f}.md`, `branch ${i} file ${f}\n`);
  }
  for (let i = 0; i < BRANCHES; i++) cli('sync', `demo/b${i}`);
  const cycles = [];
  for (let c = 0; c < CYCLES; c++) cycles.push(await cycle(c));

  const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const worst = Math.max(...cycles.map((c) => c.maxMs));
  const errors = cycles.reduce((n, c) => n + c.errors, 0);
  results = {
    branches: BRANCHES, cycles, longestWaitMs: worst, longestWaitP50Ms: p50(cycles.map((c) => c.maxMs)), errors,
    awayP50Ms: p50(cycles.map((c) => c.awayMs)), awayMaxMs: Math.max(...cycles.map((c) => c.awayMs)),
    connectionKeptEveryTime: cycles.every((c) => c.kept), calls: cycles.reduce((n, c) => n + c.calls, 0),
  };
  console.log(`nasd restart keeping the kernel connection (fd store stand-in), demo Home with ${BRANCHES} branches, ${CYCLES} cycles\n`);
  console.log('| cycle | SIGHUP until "nasd ready" | longest stat | stats | errors | connection kept |\n|---|---|---|---|---|---|');
  cycles.forEach((c, i) => console.log(`| ${i + 1} | ${c.awayMs.toFixed(0)} ms | ${c.maxMs.toFixed(0)} ms | ${c.calls} | ${c.errors} | ${c.kept ? 'yes' : 'NO'} |`));
  for (const c of cycles) for (const e of c.firstErrors) console.log(`error: ${e.path}: ${e.code} at ${e.at} ms`);
  console.log(`\nlongest wait ${worst.toFixed(0)} ms (p50 of cycles ${results.longestWaitP50Ms.toFixed(0)} ms), ${errors} errors`);
  if (KEEP_LOG && errors) {
    await fs.writeFile(KEEP_LOG, log);
    console.log(`nasd's log: ${KEEP_LOG}`);
  }
  if (JSON_OUT) await fs.writeFile(JSON_OUT, JSON.stringify(results, null, 2));
} finally {
  if (store && store.exitCode === null) {
    const gone = new Promise((r) => store.once('exit', r));
    store.kill('SIGTERM');
    await Promise.race([gone, sleep(60_000)]);
  }
  execFileSync('sh', ['-c', `grep -q " ${mnt} " /proc/self/mounts && fusermount -uz ${mnt} || true`]);
  await fs.rm(dir, { recursive: true, force: true });
}
