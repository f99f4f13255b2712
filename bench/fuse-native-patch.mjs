// What our fuse-native patch costs per request: a do-nothing fuse-native filesystem (getattr answers from
// memory) before and after the patch, beside bindfs of an empty directory and a native stat.
// Each round stats the mount root N times (attr_timeout=0: every stat is one GETATTR round trip); rounds
// alternate between the filesystems, all mounted at once. Two numbers per request: the caller's wall time
// (what a tool sees; it swings with other load on the machine) and the CPU time the filesystem's process
// spent (all its threads, from /proc/<pid>/task/*/schedstat: steadier, and where a patch's cost would show).
//
// usage (root): node bench/fuse-native-patch.mjs [--n 20000] [--rounds 7] [--before DIR]...
//   --before DIR  an unpatched fuse-native 2.2.6 package folder (more than one: each is a row). Without it,
//                 `npm pack fuse-native@2.2.6` fetches the package, used twice: with its prebuilt binary
//                 (what ran before the patch) and compiled from its source (the same compiler as the patch).
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

if (process.argv[2] === '--serve') serve(process.argv[3], process.argv[4], process.argv[5]);
else await main();

/** The filesystem under test, in its own process: `fuse-native` loaded from `dir`. */
function serve(dir, mnt, mode) {
  const Fuse = createRequire(path.join(ROOT, 'package.json'))(path.resolve(dir));
  const t = new Date();
  const root = { mode: 0o40755, size: 4096, nlink: 2, uid: 0, gid: 0, mtime: t, atime: t, ctime: t };
  let fuse;
  const ops = {
    getattr: mode === 'context'
      ? (p, cb) => { const c = fuse.context(); return p === '/' && c ? cb(0, root) : cb(Fuse.ENOENT); }
      : (p, cb) => (p === '/' ? cb(0, root) : cb(Fuse.ENOENT)),
  };
  // The options go through fsname (passed verbatim by every version), so both builds get the same command line.
  fuse = new Fuse(mnt, ops, { fsname: 'bench,attr_timeout=0,entry_timeout=60' });
  fuse.mount((err) => {
    if (err) throw err;
    console.log('mounted');
  });
  process.on('SIGTERM', () => fuse.unmount(() => process.exit(0)));
}

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
}

async function main() {
  if (process.getuid() !== 0) throw new Error('run as root: it mounts filesystems');
  const n = Number(arg('--n', 20000));
  const rounds = Number(arg('--rounds', 7));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nas-bench-fnp-'));
  const cleanups = [];
  const variants = [];
  try {
    const befores = process.argv.flatMap((a, i) => (a === '--before' ? [process.argv[i + 1]] : []));
    if (befores.length === 0) {
      execFileSync('npm', ['pack', 'fuse-native@2.2.6', '--silent', '--pack-destination', tmp], { stdio: ['ignore', 'ignore', 'inherit'] });
      for (const name of ['prebuilt', 'source']) {
        const dir = path.join(tmp, `before-${name}`);
        fs.mkdirSync(dir);
        execFileSync('tar', ['xzf', path.join(tmp, 'fuse-native-2.2.6.tgz'), '-C', dir, '--strip-components=1']);
        if (name === 'source') gypBuild(dir);
        variants.push({ name: `fuse-native 2.2.6, ${name === 'prebuilt' ? 'its prebuilt binary' : 'compiled here'}`, dir, mode: 'plain' });
      }
    } else {
      for (const dir of befores) variants.push({ name: `before: ${dir}`, dir, mode: 'plain' });
    }
    const patched = path.join(ROOT, 'node_modules/fuse-native');
    variants.push({ name: 'patched', dir: patched, mode: 'plain' });
    variants.push({ name: 'patched, handler calls context()', dir: patched, mode: 'context' });

    for (const [i, v] of variants.entries()) {
      v.mnt = path.join(tmp, `mnt${i}`);
      fs.mkdirSync(v.mnt);
      const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--serve', v.dir, v.mnt, v.mode], {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, NODE_PATH: path.join(ROOT, 'node_modules') },
      });
      cleanups.push(() => stop(child, v.mnt));
      v.pid = child.pid;
      await new Promise((resolve, reject) => {
        child.stdout.on('data', (d) => String(d).includes('mounted') && resolve());
        child.on('exit', (code) => reject(new Error(`${v.name}: the filesystem exited with ${code}`)));
      });
    }
    if (hasCommand('bindfs')) {
      const src = path.join(tmp, 'empty');
      const mnt = path.join(tmp, 'bindfs');
      fs.mkdirSync(src);
      fs.mkdirSync(mnt);
      const child = spawn('bindfs', ['-f', '-o', 'attr_timeout=0,entry_timeout=60', src, mnt], { stdio: 'inherit' });
      cleanups.push(() => stop(child, mnt));
      for (let i = 0; i < 100 && !fs.readFileSync('/proc/mounts', 'utf8').includes(` ${mnt} `); i++) await new Promise((r) => setTimeout(r, 50));
      variants.push({ name: 'bindfs of an empty directory', mnt, pid: child.pid });
    }
    const native = path.join(tmp, 'native');
    fs.mkdirSync(native);
    variants.push({ name: 'native stat (no FUSE)', mnt: native });

    for (const v of variants) {
      v.us = [];
      v.cpu = [];
    }
    for (let r = 0; r < rounds; r++) {
      for (const v of variants) {
        const before = v.pid ? cpuNs(v.pid) : 0;
        v.us.push(statLoop(v.mnt, n));
        if (v.pid) v.cpu.push((cpuNs(v.pid) - before) / n / 1000);
      }
    }

    const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
    const range = (xs) => `${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)}`;
    console.log(`\n${n} stats of a mount root (attr_timeout=0), ${rounds} rounds, load average ${os.loadavg()[0].toFixed(1)}; microseconds per stat: median (min-max of the rounds)\n`);
    console.log('| filesystem | wall time per stat | filesystem CPU per request |');
    console.log('| --- | ---: | ---: |');
    for (const v of variants) {
      const cpu = v.cpu.length ? `${med(v.cpu).toFixed(2)} (${range(v.cpu)})` : '-';
      console.log(`| ${v.name} | ${med(v.us).toFixed(1)} (${range(v.us)}) | ${cpu} |`);
    }
  } finally {
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (e) {
        console.error(`cleanup: ${e.message}`);
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** n stat() calls in a separate process (python: little overhead per call), in microseconds each. */
function statLoop(p, n) {
  const code = 'import os,sys,time\np=sys.argv[1];n=int(sys.argv[2])\nfor _ in range(500): os.stat(p)\n' +
    't=time.perf_counter_ns()\nfor _ in range(n): os.stat(p)\nprint((time.perf_counter_ns()-t)/n/1000)';
  return Number(execFileSync('python3', ['-c', code, p, String(n)], { encoding: 'utf8' }).trim());
}

/** CPU time of all threads of a process so far, in ns. */
function cpuNs(pid) {
  let total = 0;
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(fs.readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // a thread that ended meanwhile
    }
  }
  return total;
}

function gypBuild(dir) {
  const gyp = path.join(path.dirname(fs.realpathSync(execFileSync('which', ['npm'], { encoding: 'utf8' }).trim())), '../node_modules/node-gyp/bin/node-gyp.js');
  const prefix = path.resolve(process.execPath, '../..');
  const nodedir = fs.existsSync(path.join(prefix, 'include/node/node_api.h')) ? [`--nodedir=${prefix}`] : [];
  execFileSync(process.execPath, [gyp, 'rebuild', ...nodedir], { cwd: dir, stdio: 'ignore', env: { ...process.env, NODE_PATH: path.join(ROOT, 'node_modules') } });
}

function hasCommand(cmd) {
  try {
    execFileSync('which', [cmd], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function stop(child, mnt) {
  if (child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const t = setTimeout(() => child.exitCode === null && child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(t);
  }
  if (fs.readFileSync('/proc/mounts', 'utf8').includes(` ${mnt} `)) execFileSync('fusermount', ['-uz', mnt]);
}
