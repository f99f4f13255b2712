// How long nasd is away when it restarts. Run as root after `npm run build`:
//   node bench/restart.mjs [--cycles 5] [--branches 20]
// A demo Home with N branches, each with a written file (and a workspace/ bind); then, per cycle: SIGTERM
// (commit what is pending, undo the binds, unmount) until the process is gone, and a new nasd from its
// start until it logs "nasd ready" (mounted, Homes and branches open, binds made). p50 and max of each.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const CYCLES = opt('--cycles', 5);
const BRANCHES = opt('--branches', 20);

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bench-restart-'));
const state = `${dir}/state`;
const mnt = `${dir}/mnt`;
const socket = `${dir}/nasd.sock`;
const cli = (...a) =>
  execFileSync(process.execPath, [`${ROOT}/dist/src/cli/main.js`, '--socket', socket, ...a], { env: { ...process.env, NAS_OWNER_TOKEN_FILE: `${state}/owner.token`, NAS_LEASE: '' } });

let daemon = null;
async function start() {
  const t = process.hrtime.bigint();
  const child = spawn(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, '--state-dir', state, '--mount', mnt, '--socket', socket, '--demo', '--web-listen', 'off'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  while (!log.includes('"nasd ready"')) {
    if (child.exitCode !== null) throw new Error(`nasd exited:\n${log}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  daemon = child;
  return Number(process.hrtime.bigint() - t) / 1e6;
}
async function stop() {
  const t = process.hrtime.bigint();
  const gone = new Promise((r) => daemon.once('exit', r));
  process.kill(daemon.pid, 'SIGTERM');
  await gone;
  daemon = null;
  return Number(process.hrtime.bigint() - t) / 1e6;
}

try {
  await start();
  for (let i = 0; i < BRANCHES; i++) {
    cli('branch', 'create', `demo/b${i}`);
    await fs.writeFile(`${mnt}/demo@b${i}/outbox/note.md`, `branch ${i}\n`);
  }
  const stops = [];
  const starts = [];
  for (let c = 0; c < CYCLES; c++) {
    // Something pending in one branch each time: the stop commits it.
    if (BRANCHES > 0) await fs.writeFile(`${mnt}/demo@b0/outbox/cycle.md`, `cycle ${c}\n`);
    stops.push(await stop());
    starts.push(await start());
  }
  const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const row = (name, xs) => `| ${name} | ${p50(xs).toFixed(0)} ms | ${Math.max(...xs).toFixed(0)} ms |`;
  console.log(`nasd restart, demo Home with ${BRANCHES} branches (each a workspace/ bind), ${CYCLES} cycles\n`);
  console.log('| step | p50 | max |\n|---|---|---|');
  console.log(row('stop: SIGTERM until the process is gone (commit, unbind, unmount)', stops));
  console.log(row('start: spawn until "nasd ready" (mounted, branches open, binds made)', starts));
  console.log(row('away: stop + start', stops.map((s, i) => s + starts[i])));
} finally {
  if (daemon) await stop().catch(() => undefined);
  execFileSync('sh', ['-c', `grep -q " ${mnt} " /proc/self/mounts && fusermount -uz ${mnt} || true`]);
  await fs.rm(dir, { recursive: true, force: true });
}
