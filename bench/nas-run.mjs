// The nas run benchmark. Run as root after `npm run build`: node bench/nas-run.mjs [--runs 20] [--json FILE]
//  1. start-up overhead: `nas run demo --user nobody --intent x -- true` (branch, lease, socket, briefing,
//     namespace, exec, then commit and propose of nothing), p50/p90, next to the CLI's own floor (`nas status`)
//     and to `runuser -u nobody -- true`; then the same on a Home with a long day behind it (--big-home N files on
//     main, N/2 recycle entries, N/50 branches, N/10 PRs, N/33 leases and runs; big-home.mjs), and the ratio: a
//     run's cost must not grow with what the Home has accumulated;
//  2. an agent workload (untar 6,000 files, cold find, grep -r, du -s, rm -rf) inside a run's workspace/, next
//     to the same in a native directory and through bindfs (a C FUSE peer), measured in the same run;
//  3. 8 runs at once on one Home, each writing 100 files and proposing: all merged, none lost, wall time.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { growHome } from './big-home.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const RUNS = Number(opt('--runs', 20));
const PARALLEL = 8;
const FILES_EACH = 100;
const BIG = Number(opt('--big-home', 10_000));
const BIG_SIZES = { files: BIG, trash: Math.round(BIG / 2), branches: Math.round(BIG / 50), prs: Math.round(BIG / 10), leases: Math.round(BIG / 33), runs: Math.round(BIG / 33) };

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bench-run-'));
// The run's user (nobody: a run is never root) reads the workload and its tarball from here.
await fs.chmod(dir, 0o755);
await fs.chmod(dir, 0o755);
const state = `${dir}/state`;
const mnt = `${dir}/mnt`;
const socket = `${dir}/nasd.sock`;
const env = { ...process.env, NAS_OWNER_TOKEN_FILE: `${state}/owner.token`, NAS_LEASE: '', SUDO_USER: '' };
const CLI = `${ROOT}/dist/src/cli/main.js`;

const exec = (cmd, argv, opts = {}) =>
  new Promise((resolve) => {
    const child = spawn(cmd, argv, { env, stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => resolve({ code, out, err }));
  });
const timed = async (fn) => {
  const t = process.hrtime.bigint();
  const r = await fn();
  return [Number(process.hrtime.bigint() - t) / 1e6, r];
};
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];
const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const nas = (...argv) => exec(process.execPath, [CLI, '--socket', socket, ...argv]);

/** A nasd with the demo Home on its own state directory, answering once its socket does. */
async function startNasd(where) {
  const child = spawn(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, '--state-dir', `${where}/state`, '--mount', `${where}/mnt`, '--socket', `${where}/nasd.sock`, '--demo', '--log-level', 'warn'], { stdio: 'ignore' });
  for (let i = 0; i < 600 && !(await fs.stat(`${where}/nasd.sock`).catch(() => null)); i++) await new Promise((r) => setTimeout(r, 100));
  return child;
}
async function stopNasd(child, where) {
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([gone, new Promise((r) => setTimeout(r, 60000))]);
  await exec('fusermount', ['-uz', `${where}/mnt`]);
}

/**
 * p50/p90 of `nas run demo --user nobody -- true` on each nasd (its socket and owner token file), the runs
 * interleaved so that the machine's load weighs on each alike.
 */
async function startupTimes(targets) {
  const times = targets.map(() => []);
  for (let i = 0; i < RUNS; i++) {
    for (const [t, [sock, tokenFile]] of targets.entries()) {
      const [ms, r] = await timed(() => exec(process.execPath, [CLI, '--socket', sock, 'run', 'demo', '--user', 'nobody', '--intent', 'nothing', '--', 'true'], { env: { ...env, NAS_OWNER_TOKEN_FILE: tokenFile } }));
      if (r.code !== 0) throw new Error(`nas run failed: ${r.err}`);
      times[t].push(ms);
    }
  }
  return times.map((xs) => ({ p50: pct(xs, 50), p90: pct(xs, 90) }));
}

/** Start-up on a Home grown to BIG_SIZES (a second nasd, stopped while its Store grows), next to the fresh one's. */
async function bigHomeStartup() {
  const where = `${dir}/big`;
  await fs.mkdir(where, { mode: 0o755 });
  let child = await startNasd(where);
  await stopNasd(child, where);
  const [growMs] = await timed(() => growHome(`${where}/state/homes/demo.git`, BIG_SIZES));
  child = await startNasd(where);
  try {
    const [fresh, big] = await startupTimes([[socket, `${state}/owner.token`], [`${where}/nasd.sock`, `${where}/state/owner.token`]]);
    results.bigHome = { sizes: BIG_SIZES, growMs, fresh, ...big, ratioP50: big.p50 / fresh.p50, ratioP90: big.p90 / fresh.p90 };
  } finally {
    await stopNasd(child, where);
  }
  const b = results.bigHome;
  const fresh = b.fresh;
  console.log(`\nnas run start-up on a big Home (${BIG_SIZES.files} files on main, ${BIG_SIZES.trash} recycle entries, ${BIG_SIZES.branches} branches, ${BIG_SIZES.prs} PRs, ${BIG_SIZES.leases} leases, ${BIG_SIZES.runs} runs; grown in ${fmt(growMs)})`);
  console.log(`  fresh Home  p50 ${fmt(fresh.p50)}   p90 ${fmt(fresh.p90)}`);
  console.log(`  big Home    p50 ${fmt(b.p50)}   p90 ${fmt(b.p90)}`);
  console.log(`  big/fresh   p50 ${b.ratioP50.toFixed(2)}x   p90 ${b.ratioP90.toFixed(2)}x   (target: 1.2x or less)`);
}

/** The workload, timed step by step by the shell itself: one line `<step> <ns>` each. */
const WORKLOAD = `set -e
t() { date +%s%N; }
step() { s=$(t); "$@" > /dev/null; echo "$STEP $(( $(t) - s ))"; }
STEP=untar step tar xf "$1"
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
STEP=find-cold step find tree
STEP=grep-r step grep -r needle tree
STEP=du-s step du -s tree
STEP=rm-rf step rm -rf tree
`;

async function workload(where, runner) {
  const r = await runner();
  if (r.code !== 0) throw new Error(`workload in ${where} failed: ${r.err}`);
  return Object.fromEntries(r.out.trim().split('\n').map((l) => l.split(' ')).map(([k, v]) => [k, Number(v) / 1e6]));
}

let daemon;
let bindMount;
const results = {};
try {
  daemon = spawn(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, '--state-dir', state, '--mount', mnt, '--socket', socket, '--demo', '--log-level', 'warn'], { stdio: 'ignore' });
  for (let i = 0; i < 200 && !(await fs.stat(socket).catch(() => null)); i++) await new Promise((r) => setTimeout(r, 100));

  // 1. Start-up overhead.
  const floor = [];
  const runuser = [];
  const startup = [];
  for (let i = 0; i < RUNS; i++) {
    floor.push((await timed(() => nas('status')))[0]);
    runuser.push((await timed(() => exec('runuser', ['-u', 'nobody', '--', 'true'])))[0]);
    const [ms, r] = await timed(() => nas('run', 'demo', '--user', 'nobody', '--intent', 'nothing', '--', 'true'));
    if (r.code !== 0) throw new Error(`nas run failed: ${r.err}`);
    startup.push(ms);
  }
  results.startup = { p50: pct(startup, 50), p90: pct(startup, 90), cliFloorP50: pct(floor, 50), runuserP50: pct(runuser, 50) };
  console.log(`\nnas run start-up (${RUNS} runs of \`nas run demo --user nobody --intent nothing -- true\`, nothing to propose)`);
  console.log(`  p50 ${fmt(results.startup.p50)}   p90 ${fmt(results.startup.p90)}   (target p50 < 150 ms)`);
  console.log(`  for scale: the CLI's own floor (nas status) p50 ${fmt(results.startup.cliFloorP50)}; runuser -u nobody -- true p50 ${fmt(results.startup.runuserP50)}`);
  await bigHomeStartup();

  // 2. The agent workload: a 6,000-file tree, native, through bindfs, and inside a run's workspace/.
  const src = `${dir}/src/tree`;
  for (let d = 0; d < 300; d++) {
    await fs.mkdir(`${src}/d${d}`, { recursive: true });
    for (let f = 0; f < 20; f++) await fs.writeFile(`${src}/d${d}/f${f}.js`, `// file ${d}/${f}\n${'const x = 1;\n'.repeat(150)}${f === 7 ? 'needle\n' : ''}`);
  }
  const tarball = `${dir}/tree.tar`;
  execFileSync('tar', ['cf', tarball, '-C', `${dir}/src`, 'tree']);
  await fs.chmod(tarball, 0o644);
  const script = `${dir}/workload.sh`;
  await fs.writeFile(script, WORKLOAD, { mode: 0o755 });
  const native = `${dir}/native`;
  const bindSrc = `${dir}/bind-src`;
  bindMount = `${dir}/bind`;
  for (const d of [native, bindSrc, bindMount]) await fs.mkdir(d);
  execFileSync('bindfs', [bindSrc, bindMount]);
  const nativeT = await workload('native', () => exec('sh', [script, tarball], { cwd: native }));
  const bindT = await workload('bindfs', () => exec('sh', [script, tarball], { cwd: bindMount }));
  const runT = await workload('a run', () => nas('run', 'demo', '--user', 'nobody', '--no-propose', '--cwd', 'workspace', '--', 'sh', script, tarball));
  results.workload = { native: nativeT, bindfs: bindT, run: runT };
  console.log('\nagent workload, 6,000 files (time relative to native; lower is better)');
  console.log('  step        native      bindfs   run workspace/   run/native  run/bindfs');
  for (const k of Object.keys(nativeT)) {
    console.log(`  ${k.padEnd(10)} ${fmt(nativeT[k]).padStart(9)} ${fmt(bindT[k]).padStart(11)} ${fmt(runT[k]).padStart(16)}   ${(runT[k] / nativeT[k]).toFixed(2).padStart(9)}x ${(runT[k] / bindT[k]).toFixed(2).padStart(10)}x`);
  }
  const sum = (t) => Object.values(t).reduce((a, b) => a + b, 0);
  console.log(`  total      ${fmt(sum(nativeT)).padStart(9)} ${fmt(sum(bindT)).padStart(11)} ${fmt(sum(runT)).padStart(16)}   ${(sum(runT) / sum(nativeT)).toFixed(2).padStart(9)}x ${(sum(runT) / sum(bindT)).toFixed(2).padStart(10)}x   (target <= 1.2x native)`);

  // 3. Eight runs at once, each writing 100 files and proposing.
  const [wall, outs] = await timed(() => Promise.all(Array.from({ length: PARALLEL }, (_, i) =>
    nas('run', 'demo', '--user', 'nobody', '--intent', `parallel ${i}`, '--json', '--', 'sh', '-c',
      `mkdir -p outbox/p${i} && for n in $(seq 1 ${FILES_EACH}); do echo "run ${i} file $n" > outbox/p${i}/f$n.md; done`))));
  const states = outs.map((o) => (o.out ? JSON.parse(o.out).pr?.state : `failed: ${o.err}`));
  const listing = execFileSync('git', [`--git-dir=${state}/homes/demo.git`, 'ls-tree', '-r', '--name-only', 'main', 'outbox/']).toString();
  const landed = listing.split('\n').filter((l) => /^outbox\/p\d\/f\d+\.md$/.test(l)).length;
  results.parallel = { runs: PARALLEL, wallMs: wall, states, filesOnMain: landed, expected: PARALLEL * FILES_EACH };
  console.log(`\n${PARALLEL} runs at once, ${FILES_EACH} files each, proposed: ${fmt(wall)} wall`);
  console.log(`  PR states: ${states.join(', ')}`);
  console.log(`  files on main: ${landed} of ${PARALLEL * FILES_EACH}${landed === PARALLEL * FILES_EACH ? ' (none lost)' : ' (LOST SOME)'}`);
} finally {
  if (bindMount) await exec('fusermount', ['-u', bindMount]);
  if (daemon) {
    const gone = new Promise((r) => daemon.once('exit', r));
    daemon.kill('SIGTERM');
    await Promise.race([gone, new Promise((r) => setTimeout(r, 20000))]);
  }
  await exec('fusermount', ['-uz', mnt]);
  if (opt('--json', null)) await fs.writeFile(opt('--json'), JSON.stringify(results, null, 2));
  await fs.rm(dir, { recursive: true, force: true });
}
