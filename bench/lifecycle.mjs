// The lifecycle benchmark (issue 11). Run as root after `npm run build`: node bench/lifecycle.mjs [--big 100000] [--mid 10000]
//  1. checkpoint create (server time, p50 of 20) on a 1,000-file and a --big-file Home;
//  2. restore of 1,000 changed files in a branch of the --mid-file Home;
//  3. nas maintenance run on the --big Home, whose objects are all loose: time, loose objects and bytes before/after,
//     beside `git gc` of a copy of the same Store (the peer);
//  4. export and import of the --mid Home with 100 commits, beside `git bundle create --all` and a `git fetch` of
//     the bundle into an empty repository (the peer), and both files' sizes.
// Homes are seeded with git plumbing straight into the Store (an operator's way), so seeding is not measured.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const BIG = opt('--big', 100_000);
const MID = opt('--mid', 10_000);
const { client } = await import(`${ROOT}/dist/src/api/client.js`);

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bench-life-'));
const state = `${dir}/state`;
const mnt = `${dir}/mnt`;
const socket = `${dir}/nasd.sock`;
const git = (gitDir, argv, extraEnv = {}) =>
  execFileSync('git', [`--git-dir=${gitDir}`, ...argv], { env: { ...process.env, ...extraEnv }, maxBuffer: 1 << 28 }).toString().trim();
const timed = async (fn) => {
  const t = process.hrtime.bigint();
  const r = await fn();
  return [Number(process.hrtime.bigint() - t) / 1e6, r];
};
const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const mib = (b) => `${(b / 1024 ** 2).toFixed(1)} MiB`;

const started = Date.now();
const daemon = spawn(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, '--state-dir', state, '--mount', mnt, '--socket', socket, '--log-level', 'warn'],
  { stdio: ['ignore', 'ignore', 'inherit'] });
const rows = [];
try {
  for (let i = 0; i < 300; i++) {
    if (await fs.stat(socket).catch(() => null)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const call = client({ socket, headers: { 'x-nas-owner': (await fs.readFile(`${state}/owner.token`, 'utf8')).trim() } });

  /** A Home of `n` files (100 per directory), written as loose objects and made main's new head by plumbing. */
  async function seed(role, n) {
    await call('createHome', {}, { role });
    const store = `${state}/homes/${role}.git`;
    const work = `${dir}/seed-${role}`;
    for (let i = 0; i < n; i++) {
      if (i % 100 === 0) await fs.mkdir(`${work}/outbox/d${i / 100}`, { recursive: true });
      await fs.writeFile(`${work}/outbox/d${Math.floor(i / 100)}/f${i}.md`, `# File ${i}\n\nLine one of file ${i}.\n`);
    }
    const env = { GIT_WORK_TREE: work, GIT_INDEX_FILE: `${dir}/index-${role}` };
    git(store, ['read-tree', 'main'], env);
    git(store, ['add', '-A'], env);
    const commit = (message) => {
      const head = git(store, ['rev-parse', 'main']);
      const next = git(store, ['commit-tree', git(store, ['write-tree'], env), '-p', head, '-m', message], { ...env, GIT_AUTHOR_NAME: 'op', GIT_AUTHOR_EMAIL: 'op@x', GIT_COMMITTER_NAME: 'op', GIT_COMMITTER_EMAIL: 'op@x' });
      git(store, ['update-ref', 'refs/heads/main', next, head]);
    };
    commit(`seed ${n} files`);
    return { store, work, env, commit };
  }

  // nasd's first hourly pass (a minute after start) runs git gc --auto: the big Home is seeded after it, so that
  // maintenance meets all of its objects loose.
  // (--big 0: only restore and export/import.)
  if (BIG > 0) await new Promise((r) => setTimeout(r, Math.max(0, 62_000 - (Date.now() - started))));
  // 1. Checkpoints.
  for (const [role, n] of BIG > 0 ? [['small', 1000], ['big', BIG]] : []) {
    await seed(role, n);
    const times = [];
    for (let i = 0; i < 20; i++) times.push((await timed(() => call('createCheckpoint', { role }, { name: `cp-${i}` })))[0]);
    rows.push([`checkpoint create, ${n.toLocaleString('en')}-file Home (p50 of 20, server)`, fmt(p50(times)), '< 20 ms', p50(times) < 20 ? 'yes' : 'NO']);
  }

  // 3. Maintenance on the big Home (all of its objects loose), beside git gc of a copy.
  if (BIG > 0) await maintenance();
  async function maintenance() {
  const bigStore = `${state}/homes/big.git`;
  // nasd's hourly pass (a minute after start) may be packing it with gc --auto: measure from a quiet Store.
  while (await fs.stat(`${bigStore}/gc.pid`).catch(() => null)) await new Promise((r) => setTimeout(r, 500));
  await fs.cp(bigStore, `${dir}/peer-big.git`, { recursive: true });
  const [gcMs] = await timed(async () => git(`${dir}/peer-big.git`, ['gc', '--quiet', '--prune=1.hour.ago']));
  const [maintMs, [report]] = await timed(() => call('maintenance', {}, { role: 'big' }));
  const b = report.objects.before;
  const a = report.objects.after;
  rows.push([`maintenance run, ${BIG.toLocaleString('en')}-file Home`, fmt(maintMs), `git gc of a copy: ${fmt(gcMs)}`, `${(maintMs / gcMs).toFixed(2)}x git`]);
  rows.push(['  loose objects before -> after', `${b.loose} -> ${a.loose}`, '', '']);
  rows.push(['  store bytes before -> after', `${mib(b.looseBytes + b.packBytes)} -> ${mib(a.looseBytes + a.packBytes)}`, '', '']);
  }

  // 2. Restore of 1,000 files, and 4. export/import of the mid Home with 100 commits.
  const mid = await seed('mid', MID);
  for (let i = 0; i < 99; i++) {
    await fs.appendFile(`${mid.work}/outbox/d0/f${i % 100}.md`, `change ${i}\n`);
    git(mid.store, ['add', `outbox/d0/f${i % 100}.md`], mid.env);
    mid.commit(`change ${i}`);
  }
  await new Promise((r) => setTimeout(r, 1500)); // main followed by nasd
  await call('createCheckpoint', { role: 'mid' }, { name: 'before' });
  await call('createBranch', { role: 'mid' }, { branch: 'r' });
  // 1,000 of its files rewritten (all of them in a Home smaller than that: a quick run).
  for (let i = 0; i < Math.min(1000, MID); i++) await fs.writeFile(`${mnt}/mid@r/outbox/d${Math.floor(i / 100)}/f${i}.md`, `rewritten ${i}\n`);
  await call('sync', { role: 'mid' }, { branch: 'r' });
  const [restoreMs, restored] = await timed(() => call('restore', { role: 'mid' }, { branch: 'r', from: 'before' }));
  rows.push([`restore of ${restored.restored.length} files (server)`, fmt(restoreMs), '< 2 s', restoreMs < 2000 ? 'yes' : 'NO']);

  const file = `${dir}/mid.bundle`;
  const [exportMs, exported] = await timed(() => call('exportHome', { role: 'mid' }, { file }));
  const [bundleMs] = await timed(async () => git(mid.store, ['bundle', 'create', '--quiet', `${dir}/peer.bundle`, '--all']));
  const peerBytes = (await fs.stat(`${dir}/peer.bundle`)).size;
  rows.push([`export, ${MID.toLocaleString('en')} files, 100 commits (server)`, fmt(exportMs), `git bundle: ${fmt(bundleMs)}`, `${(exportMs / bundleMs).toFixed(2)}x git`]);
  rows.push(['  file size', mib(exported.bytes), `git bundle: ${mib(peerBytes)}`, `${(exported.bytes / peerBytes).toFixed(2)}x`]);
  const [importMs] = await timed(() => call('importHome', {}, { file, as: 'mid-copy' }));
  const [fetchMs] = await timed(async () => {
    git(`${dir}/peer-import.git`, ['init', '--quiet', '--bare']);
    git(`${dir}/peer-import.git`, ['fetch', '--quiet', file, '+refs/*:refs/*']);
  });
  rows.push(['import of that file (server, mounted)', fmt(importMs), `git init + fetch: ${fmt(fetchMs)}`, `${(importMs / fetchMs).toFixed(2)}x git`]);
  const same = git(mid.store, ['show-ref']) === git(`${state}/homes/mid-copy.git`, ['show-ref']);
  rows.push(['  refs identical after import', same ? 'yes' : 'NO', '', '']);
} finally {
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.once('exit', r));
  await fs.rm(dir, { recursive: true, force: true });
}

const widths = [0, 1, 2, 3].map((i) => Math.max(...[['workload', 'nasd', 'peer / target', 'ratio / met'], ...rows].map((r) => String(r[i]).length)));
for (const r of [['workload', 'nasd', 'peer / target', 'ratio / met'], ...rows]) console.log(r.map((c, i) => String(c).padEnd(widths[i])).join('  '));
