// Crash figures: kill -9 nasd while a writer creates files and fsyncs each one, restart, and check that every
// file whose fsync returned (confirmed) is in git with its exact content. Run as root after `npm run build`:
// node bench/crash-loop.mjs [--kills 10]
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const KILLS = Number(args.includes('--kills') ? args[args.indexOf('--kills') + 1] : 10);
const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bench-crash-'));
const state = `${dir}/state`;
const mnt = `${dir}/mnt`;
const socket = `${dir}/nasd.sock`;
const env = { ...process.env, NAS_OWNER_TOKEN_FILE: `${state}/owner.token`, NAS_LEASE: '' };

const WRITER = `
import os, sys
base, i = sys.argv[1], int(sys.argv[2])
os.makedirs(base, exist_ok=True)
while True:
    try:
        fd = os.open(f"{base}/f{i}.md", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, f"file {i}\\n".encode() * 50)
        os.fsync(fd)
        os.close(fd)
    except OSError:
        break
    print(i, flush=True)
    i += 1
`;

function startDaemon() {
  const child = spawn(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, '--state-dir', state, '--mount', mnt, '--socket', socket, '--demo'], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let log = '';
    const seen = (d) => {
      log += d;
      // After a kill -9 the old socket file and the stale mount are still there: only the new daemon's word counts.
      if (log.includes('"nasd ready"')) resolve(child);
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.once('exit', () => reject(new Error(`nasd exited before it was ready: ${log}`)));
  });
}
const nas = (...argv) => execFileSync(process.execPath, [`${ROOT}/dist/src/cli/main.js`, '--socket', socket, ...argv], { env, stdio: ['ignore', 'pipe', 'pipe'] }).toString();

let daemon;
let confirmed = 0;
let next = 0;
const expected = new Map();
try {
  daemon = await startDaemon();
  nas('branch', 'create', 'demo/crash');
  for (let k = 0; k < KILLS; k++) {
    const writer = spawn('python3', ['-c', WRITER, `${mnt}/demo@crash/outbox/c`, String(next)], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    writer.stdout.on('data', (d) => (out += d));
    await new Promise((r) => setTimeout(r, 300 + Math.random() * 1200));
    daemon.kill('SIGKILL');
    await new Promise((r) => daemon.once('exit', r));
    await new Promise((r) => writer.once('exit', r));
    const done = out.split('\n').filter(Boolean).map(Number);
    for (const i of done) expected.set(`outbox/c/f${i}.md`, `file ${i}\n`.repeat(50));
    confirmed += done.length;
    next = (done.at(-1) ?? next - 1) + 2;
    daemon = await startDaemon();
    try {
      nas('sync', 'demo/crash');
    } catch (e) {
      throw new Error(`nas sync after restart ${k + 1} failed: ${e.stderr}`);
    }
  }
  const git = (...a) => execFileSync('git', [`--git-dir=${state}/homes/demo.git`, ...a], { maxBuffer: 1 << 28 }).toString();
  const inGit = new Set(git('ls-tree', '-r', '--name-only', 'crash', 'outbox/c/').split('\n').filter(Boolean));
  let intact = 0;
  const lost = [];
  for (const [p, content] of expected) {
    if (inGit.has(p) && git('cat-file', 'blob', `crash:${p}`) === content) intact++;
    else lost.push(p);
  }
  const fsck = (() => { try { git('fsck', '--no-dangling'); return 'clean'; } catch (e) { return `FAILED: ${e.message}`; } })();
  console.log(`\ncrash loop: ${KILLS} kill -9 of nasd during writes (each file written, fsynced, closed)`);
  console.log(`  confirmed (fsync returned): ${confirmed}   in git with exact content: ${intact}   lost: ${lost.length}${lost.length ? ` (${lost.slice(0, 5).join(', ')})` : ''}`);
  console.log(`  files in git (confirmed or not): ${inGit.size}   git fsck: ${fsck}`);
} finally {
  if (daemon && daemon.exitCode === null) {
    const gone = new Promise((r) => daemon.once('exit', r));
    daemon.kill('SIGTERM');
    await Promise.race([gone, new Promise((r) => setTimeout(r, 20000))]);
  }
  try { execFileSync('fusermount', ['-uz', mnt], { stdio: 'ignore' }); } catch { /* not mounted */ }
  await fs.rm(dir, { recursive: true, force: true });
}
