// The Agent PR benchmark: propose + merge of a branch that changed 1, 100 and 1,000 files in a Home of
// 10,000 files, next to `git merge --no-ff` of the same branches in a native clone and in a clone served
// through bindfs (a C FUSE peer); then 8 branches proposed at once (none may be lost).
// Run as root after `npm run build`: node bench/merge.mjs [--files 10000] [--sizes 1,100,1000] [--json FILE]
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const FILES = Number(opt('--files', 10000));
// Branch sizes (a quick run: --sizes 1,5); each branch is named size<n> (b100 would read as a commit id).
const SIZES = String(opt('--sizes', '1,100,1000')).split(',').map(Number);
const PARALLEL = 8;

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bench-merge-'));
const state = `${dir}/state`;
const mnt = `${dir}/mnt`;
const socket = `${dir}/nasd.sock`;
const store = `${state}/homes/demo.git`;
const env = { ...process.env, NAS_OWNER_TOKEN_FILE: `${state}/owner.token`, NAS_LEASE: '' };

const sh = (cmd, argv, opts = {}) => execFileSync(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 28, ...opts }).toString();
const git = (cwd, ...argv) => sh('git', ['-c', 'user.name=bench', '-c', 'user.email=bench@x', ...argv], { cwd });
const nas = (...argv) =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [`${ROOT}/dist/src/cli/main.js`, '--socket', socket, '--json', ...argv], { env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => (code === 0 || out ? resolve(out ? JSON.parse(out) : null) : reject(new Error(`nas ${argv.join(' ')}: ${err}`))));
  });
const timed = async (fn) => {
  const t = process.hrtime.bigint();
  const r = await fn();
  return [Number(process.hrtime.bigint() - t) / 1e6, r];
};
const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);

let daemon;
let bindMount;
try {
  daemon = spawn(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, '--state-dir', state, '--mount', mnt, '--socket', socket, '--demo', '--log-level', 'warn'], { stdio: 'ignore' });
  for (let i = 0; i < 200 && !(await fs.stat(socket).catch(() => null)); i++) await new Promise((r) => setTimeout(r, 100));

  // A Home of FILES files: pushed to main with git, as an operator would seed it.
  const seed = `${dir}/seed`;
  git(dir, 'clone', '-q', store, seed);
  for (let i = 0; i < FILES; i++) {
    const file = `${seed}/outbox/d${String(i % 100).padStart(2, '0')}/f${i}.md`;
    if (i < 100) await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, `# File ${i}\n\nLine one of file ${i}.\nLine two of file ${i}.\n`);
  }
  git(seed, 'add', '-A');
  git(seed, 'commit', '-qm', `seed ${FILES} files`);
  sh('git', ['push', '-q', 'origin', 'main'], { cwd: seed, env: { ...process.env, NAS_OPERATOR_PUSH: '1' } });
  await new Promise((r) => setTimeout(r, 1500));

  // One branch per size, all forked from the same main; each rewrites line two of its own files. Proposed in
  // order, so the first merges onto the main it forked from and the later ones make real three-way merges.
  let offset = 0;
  for (const n of SIZES) {
    await nas('branch', 'create', `demo/size${n}`);
    for (let i = offset; i < offset + n; i++) {
      const rel = `outbox/d${String(i % 100).padStart(2, '0')}/f${i}.md`;
      await fs.writeFile(`${mnt}/demo@size${n}/${rel}`, `# File ${i}\n\nLine one of file ${i}.\nLine two, changed by size${n}.\n`);
    }
    await nas('sync', `demo/size${n}`);
    offset += n;
  }
  const native = `${dir}/native`;
  git(dir, 'clone', '-q', store, native);
  const viaFuse = `${dir}/fuse-backing`;
  git(dir, 'clone', '-q', store, viaFuse);
  const fuseDir = `${dir}/fuse`;
  await fs.mkdir(fuseDir);
  let bindfs = true;
  try {
    sh('bindfs', [viaFuse, fuseDir]);
    bindMount = fuseDir;
  } catch {
    bindfs = false;
  }

  const rows = [];
  for (const n of SIZES) {
    const [nasMs, pr] = await timed(() => nas('propose', `demo/size${n}`, '--into', 'main', '--intent', `change ${n} files`));
    if (pr.state !== 'merged') throw new Error(`PR for size${n} is ${pr.state}: ${JSON.stringify(pr.reasons)}`);
    const [nativeMs] = await timed(async () => git(native, 'merge', '--no-ff', '-q', '-m', `size${n}`, `origin/size${n}`));
    const [fuseMs] = bindfs ? await timed(async () => git(fuseDir, 'merge', '--no-ff', '-q', '-m', `size${n}`, `origin/size${n}`)) : [NaN];
    rows.push({ n, nasMs, nativeMs, fuseMs, checksMs: pr.checks.reduce((s, c) => s + c.ms, 0) });
  }

  // PARALLEL branches proposed at once, 10 files each.
  const names = Array.from({ length: PARALLEL }, (_, i) => `p${i}`);
  for (const [k, b] of names.entries()) {
    await nas('branch', 'create', `demo/${b}`);
    for (let i = 0; i < 10; i++) await fs.writeFile(`${mnt}/demo@${b}/outbox/parallel-${k}-${i}.md`, `${b} ${i}\n`);
    await nas('sync', `demo/${b}`);
  }
  const [parallelMs, prs] = await timed(() => Promise.all(names.map((b) => nas('propose', `demo/${b}`, '--into', 'main', '--intent', `parallel ${b}`))));
  const merged = prs.filter((p) => p.state === 'merged').length;
  const tree = sh('git', ['--git-dir', store, 'ls-tree', '-r', '--name-only', 'main', 'outbox/']).split('\n').filter((l) => l.includes('parallel-'));

  console.log(`| propose + merge into main (Home of ${FILES.toLocaleString('en')} files) | nasd | git merge, native clone | git merge, bindfs clone | ratio vs native | target | met |`);
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const target = r.n === 1000 ? '< 2 s' : '-';
    const met = r.n === 1000 ? (r.nasMs < 2000 ? 'yes' : 'NO') : '';
    console.log(`| ${r.n} changed file(s) (checks ${fmt(r.checksMs)}) | ${fmt(r.nasMs)} | ${fmt(r.nativeMs)} | ${bindfs ? fmt(r.fuseMs) : 'bindfs missing'} | ${(r.nativeMs / r.nasMs).toFixed(2)}x | ${target} | ${met} |`);
  }
  console.log(`\n${PARALLEL} branches proposed at once: ${merged}/${PARALLEL} merged, ${tree.length}/${PARALLEL * 10} files on main, ` +
    `${fmt(parallelMs)} in all (${((PARALLEL / parallelMs) * 1000).toFixed(1)} merges/s); none lost: ${merged === PARALLEL && tree.length === PARALLEL * 10 ? 'yes' : 'NO'}`);
  const json = opt('--json');
  if (json) await fs.writeFile(json, JSON.stringify({ rows, parallel: { ms: parallelMs, merged, files: tree.length } }, null, 2));
} finally {
  if (bindMount) sh('fusermount', ['-u', bindMount]);
  if (daemon) {
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
  }
  if ((await fs.readFile('/proc/mounts', 'utf8')).includes(mnt)) sh('fusermount', ['-uz', mnt]);
  await fs.rm(dir, { recursive: true, force: true });
}
