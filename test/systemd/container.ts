import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ROOT, run, type RunResult } from '../helpers.js';

/**
 * A Debian bookworm booted by systemd-nspawn with systemd as its init, the project's checkout bound read-only at
 * /opt/agent-nas (the operator's path, docs/operating.md) and this machine's Node at /usr/bin/node. The root is built once per
 * machine (build-root.sh, cached under CACHE, rebuilt when missing or when its recipe changes) and booted as a
 * read-only lower layer with a tmpfs above it (--volatile=overlay): every boot starts from the same clean root,
 * and several may boot from it at once.
 */
const CACHE = process.env.NAS_SYSTEMD_CACHE || '/var/cache/agent-nas-test';
export const ROOTFS = `${CACHE}/systemd-root`;
const MIRROR = process.env.NAS_DEBIAN_MIRROR || 'http://deb.debian.org/debian';
/**
 * What the units need at run time: systemd itself, fuse3 (fusermount3, mount.fuse3), git, python3 (the broker and
 * the relay), and the shared libraries of the native addons in node_modules (libfuse2 for fuse-native today,
 * libfuse3-3 for the libfuse 3 binding; Kerberos for nodegit). procps for ps in the tests' diagnostics. Debian's
 * etcd (its etcd.service, disabled in the root: build-root.sh) and etcdctl for the cluster suite.
 */
const PACKAGES = ['systemd', 'systemd-sysv', 'dbus', 'fuse3', 'libfuse3-3', 'libfuse2', 'git', 'python3', 'ca-certificates', 'libgssapi-krb5-2', 'procps',
  'etcd-server', 'etcd-client'];
const BUILD = path.join(import.meta.dirname, 'build-root.sh');
const PATH_INSIDE = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Build the root unless the cached one matches the recipe; throws one line saying why it could not. */
export async function ensureRoot(): Promise<void> {
  const recipe = createHash('sha256').update(fs.readFileSync(BUILD)).update(MIRROR).update(PACKAGES.join(',')).digest('hex');
  for (const tool of ['debootstrap', 'systemd-nspawn', 'nsenter', 'flock']) {
    if ((await run('sh', ['-c', `command -v ${tool}`])).code !== 0) {
      throw new Error(`systemd suite: ${tool} is missing (AGENT_NAS_TESTS=1 scripts/setup.sh installs debootstrap and systemd-container)`);
    }
  }
  if (process.getuid?.() !== 0) throw new Error('systemd suite: the container needs root');
  const r = await run('bash', [BUILD, ROOTFS, recipe, MIRROR, PACKAGES.join(',')]);
  if (r.code !== 0) {
    const why = r.stderr.trim().split('\n').pop() ?? `exit ${r.code}`;
    throw new Error(`systemd suite: cannot build the container root (${why}); log: ${ROOTFS}.build.log`);
  }
}

export interface BootOptions {
  /** Files put into the container at boot, read-only (e.g. /etc/fstab): path inside -> content. */
  files?: Record<string, string>;
  /** The container's host name (also its machine name's tail); default: the machine name. */
  name?: string;
  /**
   * 'host': share this machine's network namespace (no --private-network): the containers and the test reach each
   * other on 127.0.0.1, each service on its own port. Default 'private': a network namespace with loopback only.
   */
  network?: 'private' | 'host';
}

export class Container {
  private constructor(
    readonly nspawn: ChildProcess,
    readonly init: number,
    readonly dir: string,
    readonly cgroups: string[],
  ) {}

  /** Boot a container and wait until systemd has finished starting it. */
  static async boot(opts: BootOptions = {}): Promise<Container> {
    await ensureRoot();
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'nas-systemd-'));
    const binds = [`--bind-ro=${ROOT}:/opt/agent-nas`, `--bind-ro=${process.execPath}:/usr/bin/node`, '--bind=/dev/fuse'];
    // node_modules may be a link to a shared install: bind that too, where the link points.
    const modules = await fsp.realpath(`${ROOT}/node_modules`);
    if (modules !== `${ROOT}/node_modules`) binds.push(`--bind-ro=${modules}:${modules}`);
    for (const [inside, text] of Object.entries(opts.files ?? {})) {
      const file = path.join(dir, inside.replaceAll('/', '_'));
      await fsp.writeFile(file, text);
      binds.push(`--bind-ro=${file}:${inside}`);
    }
    const log = fs.openSync(`${dir}/console.log`, 'a');
    const machine = `nas-sd-${process.pid}${opts.name ? `-${opts.name}` : ''}`;
    const cgroups = cgroupDirs(machine);
    // sh moves itself into the container's own cgroups, then execs nspawn (the pid stays nspawn's).
    const nspawn = spawn('sh', ['-c', 'IFS=:; for d in $0; do mkdir -p "$d" && echo $$ >"$d/cgroup.procs" || exit 1; done; exec "$@"', cgroups.join(':'),
      'systemd-nspawn', '--quiet', '--register=no', '--keep-unit', `--machine=${machine}`,
      ...(opts.name ? [`--hostname=${opts.name}`] : []), '-D', ROOTFS, '--volatile=overlay',
      ...(opts.network === 'host' ? [] : ['--private-network']), '--capability=all', '--console=read-only', ...binds, '--boot',
    ], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    const exited = new Promise<void>((resolve) => nspawn.once('exit', () => resolve()));
    let init = 0;
    for (let i = 0; i < 200 && !init && nspawn.exitCode === null; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const read = (file: string) => {
        try {
          return fs.readFileSync(file, 'utf8').trim();
        } catch {
          return '';
        }
      };
      for (const pid of read(`/proc/${nspawn.pid}/task/${nspawn.pid}/children`).split(/\s+/).filter(Boolean)) {
        if (read(`/proc/${pid}/comm`) === 'systemd') init = Number(pid);
      }
    }
    const c = new Container(nspawn, init, dir, cgroups);
    c.exited = exited;
    if (!init) {
      await c.stop();
      throw new Error(`systemd-nspawn did not start systemd: ${await c.console()}`);
    }
    // systemctl needs the manager's socket, made early in the boot; then it waits for the boot's end itself.
    const up = await c.sh('for i in $(seq 300); do [ -S /run/systemd/private ] && break; sleep 0.1; done; timeout 90 systemctl is-system-running --wait');
    if (!/running|degraded/.test(up.stdout)) {
      const failed = await c.sh('systemctl --failed --no-legend; journalctl -b --no-pager | tail -30');
      await c.stop();
      throw new Error(`the container did not finish booting (${up.stdout.trim()} ${up.stderr.trim()}): ${failed.stdout}`);
    }
    return c;
  }

  private exited: Promise<void> = Promise.resolve();

  /** The console's output (systemd's boot messages). */
  async console(): Promise<string> {
    return fsp.readFile(`${this.dir}/console.log`, 'utf8').catch(() => '');
  }

  /** A shell command inside the container (all its namespaces, a clean environment), as root. */
  async sh(cmd: string, env: Record<string, string> = {}): Promise<RunResult> {
    const vars = Object.entries({ PATH: PATH_INSIDE, LANG: 'C.UTF-8', ...env }).map(([k, v]) => `${k}=${v}`);
    return run('nsenter', ['-t', String(this.init), '-a', 'env', '-i', ...vars, '/bin/sh', '-c', cmd]);
  }

  /** Like sh, but throws with its output when the command fails; returns its stdout. */
  async ok(cmd: string, env: Record<string, string> = {}): Promise<string> {
    const r = await this.sh(cmd, env);
    if (r.code !== 0) throw new Error(`in the container, \`${cmd}\` exited ${r.code}:\n${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  /** Write a file inside the container (its folder made), as root. */
  async write(file: string, text: string): Promise<void> {
    await this.ok(`mkdir -p "$(dirname '${file}')" && echo ${Buffer.from(text).toString('base64')} | base64 -d >'${file}'`);
  }

  /**
   * Stop the container by systemd-nspawn's pid: SIGTERM has it ask systemd for an orderly shutdown; after 30 s
   * its init is killed (which ends every process in the container's pid namespace) and nspawn with it.
   */
  async stop(): Promise<void> {
    if (this.nspawn.exitCode === null && this.nspawn.signalCode === null) {
      process.kill(this.nspawn.pid!, 'SIGTERM');
      const timer = new Promise((r) => setTimeout(r, 30_000, 'late'));
      if ((await Promise.race([this.exited, timer])) === 'late') {
        if (this.init) process.kill(this.init, 'SIGKILL');
        process.kill(this.nspawn.pid!, 'SIGKILL');
        await this.exited;
      }
    }
    await fsp.rm(this.dir, { recursive: true, force: true });
    for (const d of this.cgroups) await removeCgroup(d);
  }
}

/**
 * The cgroups a container is started in, one per hierarchy systemd uses (cgroup v2, or v1's name=systemd and the
 * unified one beside it). With --keep-unit, nspawn puts the container's cgroups below its own: containers started
 * from one process would share them, and each one's systemd would find the others' nasd.service processes in its
 * own nasd.service (a stop there fails to kill them: EIO, not in its pid namespace).
 */
function cgroupDirs(name: string): string[] {
  const own = fs.readFileSync('/proc/self/cgroup', 'utf8');
  const v2 = /^0::(\/.*)$/m.exec(own)?.[1];
  const named = /^\d+:name=systemd:(\/.*)$/m.exec(own)?.[1];
  if (fs.existsSync('/sys/fs/cgroup/cgroup.procs')) return v2 ? [path.join('/sys/fs/cgroup', v2, name)] : [];
  const dirs: string[] = [];
  if (named) dirs.push(path.join('/sys/fs/cgroup/systemd', named, name));
  if (v2 && fs.existsSync('/sys/fs/cgroup/unified/cgroup.procs')) dirs.push(path.join('/sys/fs/cgroup/unified', v2, name));
  return dirs;
}

/** rmdir a cgroup and those below it, deepest first (a cgroup's control files go with its directory). */
async function removeCgroup(dir: string): Promise<void> {
  for (const e of await fsp.readdir(dir, { withFileTypes: true }).catch(() => [])) if (e.isDirectory()) await removeCgroup(path.join(dir, e.name));
  await fsp.rmdir(dir).catch(() => undefined);
}
