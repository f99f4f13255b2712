import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DIR_PREFIX, OWNER_FILE, processId, stillRunning, type OwnerRecord } from './helpers.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const DAEMON = `${ROOT}/dist/src/daemon/main.js`;

/** Mount points, with /proc/mounts' octal escapes (\040 for a space) decoded. */
function mountPoints(): string[] {
  return fs.readFileSync('/proc/mounts', 'utf8').split('\n')
    .map((l) => l.split(' ')[1])
    .filter((m): m is string => !!m)
    .map((m) => m.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
}

/** The TestDaemon dir a mount point lies in (`<tmp>/nas-test-XXXXXX`), if any. */
function testDirOf(mount: string): string | null {
  const i = mount.indexOf(`/${DIR_PREFIX}`);
  if (i < 0) return null;
  const end = mount.indexOf('/', i + 1);
  return end < 0 ? mount : mount.slice(0, end);
}

function readOwner(dir: string): OwnerRecord | null {
  try {
    return JSON.parse(fs.readFileSync(`${dir}/${OWNER_FILE}`, 'utf8')) as OwnerRecord;
  } catch {
    return null;
  }
}

function lazyUnmount(mount: string): void {
  try {
    execFileSync('fusermount', ['-uz', mount], { stdio: 'ignore' });
  } catch {
    // already gone
  }
}

/** A FUSE mount whose daemon is gone answers ENOTCONN; a live one (perhaps another run's) answers. statfs always asks. */
function isStale(mount: string): boolean {
  try {
    fs.statfsSync(mount);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOTCONN';
  }
}

/**
 * Before and after the suite: clean up after test processes that are gone (and, at teardown, after this
 * run's own). Other runs may be going on at the same time (another checkout's suite): their daemons and
 * mounts are left alone. A dir whose owner record names a dead test process loses its daemon (killed by
 * its recorded pid), its mounts and itself.
 * Dirs from before owner records existed: only mounts that are certainly stale are unmounted.
 */
async function sweep(when: 'setup' | 'teardown'): Promise<void> {
  // At teardown every test of this run has finished, though its worker processes may not have exited yet.
  const self = processId(process.pid);
  const ours = (o: OwnerRecord) => when === 'teardown' && !!o.runner && !!self && o.runner.pid === self.pid && o.runner.start === self.start;
  const mounts = mountPoints();
  const dirs = new Set<string>();
  for (const name of fs.readdirSync(os.tmpdir())) if (name.startsWith(DIR_PREFIX)) dirs.add(path.join(os.tmpdir(), name));
  for (const m of mounts) {
    const dir = testDirOf(m);
    if (dir) dirs.add(dir);
  }
  for (const dir of dirs) {
    const under = (all: string[]) => all.filter((m) => m === dir || m.startsWith(`${dir}/`));
    const owner = readOwner(dir);
    if (!owner) {
      for (const m of under(mounts)) if (isStale(m)) lazyUnmount(m);
      continue;
    }
    if (stillRunning(owner.test) && !ours(owner)) continue; // a live run's: this one's (still going) or a concurrent one's
    if (stillRunning(owner.daemon)) {
      process.kill(owner.daemon.pid, 'SIGKILL');
      for (let i = 0; i < 100 && stillRunning(owner.daemon); i++) await new Promise((r) => setTimeout(r, 50));
    }
    for (const m of under(mounts)) lazyUnmount(m);
    // Never remove a tree that still has something mounted in it.
    if (under(mountPoints()).length === 0) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The newest mtime of any source file (.ts, .cc, .h) below dir, outside the folders in `skip`. */
function newestSource(dir: string, skip: string[] = []): { file: string; mtimeMs: number } | null {
  let newest: { file: string; mtimeMs: number } | null = null;
  for (const rel of fs.readdirSync(dir, { recursive: true }) as string[]) {
    if (skip.some((s) => rel.startsWith(s))) continue;
    if (!/\.(ts|cc|h)$/.test(rel)) continue;
    const file = path.join(dir, rel);
    const { mtimeMs } = fs.statSync(file);
    if (!newest || mtimeMs > newest.mtimeMs) newest = { file, mtimeMs };
  }
  return newest;
}

export async function setup(): Promise<void> {
  if (!fs.existsSync(DAEMON)) throw new Error('dist/ is missing: run `npm run -s build` first (`npm test` and scripts/test.sh build first)');
  // The scenarios run the built daemon and CLI: a stale dist/ would test yesterday's code.
  const built = fs.statSync(DAEMON).mtimeMs;
  const newest = newestSource(`${ROOT}/src`);
  if (newest && newest.mtimeMs > built) {
    throw new Error(`dist/ is stale: ${path.relative(ROOT, newest.file)} is newer than dist/src/daemon/main.js; run \`npm run -s build\` (\`npm test\` builds first)`);
  }
  // The same for the FUSE binding: native/ compiled before its last edit would test an older binding.
  const addon = `${ROOT}/native/build/Release/nasfuse.node`;
  if (!fs.existsSync(addon)) throw new Error('the FUSE binding is not built: run scripts/build-native.sh (scripts/setup.sh does)');
  // Its outputs (build*/) and its C++ unit tests (test/: not part of the addon) do not count.
  const source = newestSource(`${ROOT}/native`, ['build', 'test/']);
  if (source && source.mtimeMs > fs.statSync(addon).mtimeMs) {
    throw new Error(`the FUSE binding is stale: ${path.relative(ROOT, source.file)} is newer than it; run scripts/build-native.sh`);
  }
  await sweep('setup');
}

export async function teardown(): Promise<void> {
  await sweep('teardown');
}
