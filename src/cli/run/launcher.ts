import { spawn, type ChildProcess } from 'node:child_process';
import { namespaceMembers } from '../../util/pid-namespace.js';
import { constants } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Readable, Writable } from 'node:stream';
import type { Account } from '../../util/accounts.js';
import type { RunStart } from '../../api/types.js';

/**
 * One run's processes: a private mount and PID namespace (unshare) in which the run's branch view is bound
 * over the Home's path, the run's socket over nasd's, and the command runs as the run's user. Unless the run's
 * lease has the egress scope, a network namespace too, with loopback only: nothing outside the run is reachable
 * over the network, not even the host's own 127.0.0.1 (nasd's control socket is a Unix socket, bound in by path). The namespace
 * keeps the run's process tree together: a process is the run's exactly when it is in that namespace (nasd
 * uses this for the read manifest), and when the namespace's first process ends, the kernel ends the rest.
 */

/**
 * Runs as root inside the new namespaces, as PID 1 (which ignores signals it has no handler for, so it
 * outlives its command and passes the status on). $1 view, $2 Home path, $3 run socket, $4 nasd's socket,
 * $5 working directory, $6 uid, $7 gid, $8 nasd's state directory, $9 nas-no-userns, $10 `loopback-only` (a new
 * network namespace) or `host-network` (the lease's egress scope), then the command, which
 * runs as the run's user, with no_new_privs, unable to make or join namespaces (a namespace made inside the run
 * would be below the run's, which nasd counts as the run's, but a user namespace also brings capabilities). Other branches'
 * workspace/ binds are detached (plain directories: nasd never sees who reads them). The Store is covered by
 * an empty unreadable directory, so the run reaches Homes only through the views (its own workspace/ stays: a
 * bind mount holds its directory, not its path). Says its namespace on fd 3 and waits on fd 4 until nasd
 * knows the namespace, so no read of the command's goes unattributed.
 */
const SETUP = `set -e
# Other branches' workspace/ binds came along with the mount table: they are not this run's to reach. The view (with
# its own binds) and the bare mount root are staged on a tmpfs, the root with everything on it is detached at once,
# and both are put back: a few calls whatever the number of branches (one umount each cost a second per 100).
root=\${2%/*}
mount -t tmpfs -o mode=700,size=4k nas-run-stage "$8"
mkdir "$8/view" "$8/root"
mount --rbind -- "$1" "$8/view"
mount --bind -- "$root" "$8/root"
umount -l -- "$root"
mount --move -- "$8/root" "$root"
mount --move -- "$8/view" "$2"
umount -- "$8"
if [ -S "$4" ]; then mount --bind -- "$3" "$4"; fi
mount -t tmpfs -o mode=000,size=4k nas-store-hidden "$8"
if [ "\${10}" = loopback-only ]; then
  # A new network namespace starts with lo down: up, so the run's own servers on 127.0.0.1 work.
  if command -v ip >/dev/null 2>&1; then ip link set lo up || true; fi
  # sysfs shows the network of whoever mounted it: the namespace's own devices (lo) over the host's.
  mkdir "$8/sys" && mount -t sysfs nas-sysfs "$8/sys" &&
    mount --bind "$8/sys/class/net" /sys/class/net && mount --bind "$8/sys/devices/virtual/net" /sys/devices/virtual/net || true
  umount "$8/sys" 2>/dev/null || true
  rmdir "$8/sys" 2>/dev/null || true
  # Sockets reached by path are files, which the namespace does not cut: the host's services that would act for
  # the run outside it (the user's systemd and session bus, the system bus, the resolvers) are hidden.
  for d in /run/user /run/dbus /run/systemd/resolve /run/nscd; do
    case "$4/" in "$d"/*) continue ;; esac
    if [ -d "$d" ]; then mount -t tmpfs -o ro,mode=755,size=4k nas-hidden "$d" || true; fi
  done
fi
mount -o remount,ro "$8"
readlink /proc/self/ns/pid >&3
exec 3>&-
read -r go <&4 || exit 125
exec 4<&-
cd -- "$5"
# cd set OLDPWD to where nas run was called (root's directory, not the run's business); PWD is the run's own.
unset OLDPWD
PWD=$5; export PWD
uid=$6 gid=$7 confine=$9
shift 10
set +e
# The filter first, as root (the run's user may not reach this checkout); setpriv needs nothing it refuses.
"$confine" setpriv --reuid="$uid" --regid="$gid" --init-groups --no-new-privs -- "$@"
exit $?
`;

/** Installs the seccomp filter that keeps a run's processes from making or joining namespaces. */
const NO_USERNS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../libexec/nas-no-userns');

export interface Ended {
  /** The exit status as a shell reports it: the command's, or 128 + N when signal N ended it. */
  code: number;
  signal?: string;
}

export class RunProcess {
  private readonly child: ChildProcess;
  private ns?: string;
  /** A signal that came before the command was let go: it is then not started at all. */
  private early?: NodeJS.Signals;
  private going = false;
  private signalled = 0;
  readonly ended: Promise<Ended>;

  constructor(start: RunStart, account: Account, command: string[], cwd: string, mainSocket: string, env: NodeJS.ProcessEnv) {
    const dir = cwd ? `${start.homePath}/${cwd}` : start.homePath;
    // setpriv --pdeathsig: if nas run is killed outright, unshare dies, and --kill-child takes the namespace with it.
    this.child = spawn(
      'setpriv',
      ['--pdeathsig', 'KILL', '--', 'unshare', '--mount', '--pid', ...(start.egress ? [] : ['--net']), '--fork', '--mount-proc', '--propagation', 'private',
        '--kill-child=SIGKILL', '--', '/bin/sh', '-c', SETUP, 'nas-run', start.viewPath, start.homePath, start.socket, mainSocket, dir,
        String(account.uid), String(account.gid), start.store, NO_USERNS, start.egress ? 'host-network' : 'loopback-only', ...command],
      { stdio: ['inherit', 'inherit', 'inherit', 'pipe', 'pipe'], env },
    );
    // The set-up may end before it reads "go" (a mount failed): a write to it then fails, which is no crash.
    for (const fd of [3, 4]) (this.child.stdio[fd] as Readable | Writable | null)?.on('error', () => undefined);
    this.ended = new Promise((resolve) => {
      this.child.once('error', () => resolve({ code: 127 }));
      this.child.once('exit', (code, signal) => resolve(endedBy(code, signal)));
    });
  }

  /** The run's PID namespace (`pid:[…]`), once its mounts are made; null if set-up failed. */
  async namespace(): Promise<string | null> {
    const out = this.child.stdio[3] as Readable;
    let text = '';
    out.setEncoding('utf8');
    // One line, not EOF: unshare, which waits for the namespace, holds the same pipe open.
    for await (const chunk of out) {
      text += chunk;
      if (text.includes('\n')) break;
    }
    out.destroy();
    const ns = text.trim();
    this.ns = /^pid:\[\d+\]$/.test(ns) ? ns : undefined;
    return this.ns ?? null;
  }

  /** The signal that stopped the run before its command started, if one did. */
  get stoppedEarly(): Ended | undefined {
    return this.early ? { code: 128 + (constants.signals[this.early] ?? 0), signal: this.early } : undefined;
  }

  /** Let the command start (nasd knows the namespace now), or end the set-up without it. Whether it started. */
  go(start: boolean): boolean {
    const input = this.child.stdio[4] as Writable;
    const starting = start && !this.early;
    this.going = starting;
    if (starting) input.end('go\n');
    else input.destroy();
    return starting;
  }

  /**
   * Send a signal to every process of the run but the namespace's init, which passes the command's status on
   * (and which unshare cannot report SIGKILL of). A second request to stop sends SIGKILL, for a command that
   * does not listen.
   */
  signal(sig: NodeJS.Signals): void {
    if (!this.going) {
      this.early ??= sig;
      return;
    }
    if (this.signalled++ > 0) sig = 'SIGKILL';
    for (const pid of this.members()) {
      try {
        process.kill(pid, sig);
      } catch {
        // Ended meanwhile.
      }
    }
  }

  private members(): number[] {
    return this.ns ? namespaceMembers(this.ns, false) : [];
  }
}

function endedBy(code: number | null, signal: NodeJS.Signals | null): Ended {
  if (signal) return { code: 128 + (constants.signals[signal] ?? 0), signal };
  const status = code ?? 1;
  // The shell that ran the command reports death by signal N as 128 + N.
  const name = status > 128 && status < 128 + 65 ? signalName(status - 128) : undefined;
  return name ? { code: status, signal: name } : { code: status };
}

function signalName(n: number): string | undefined {
  return Object.entries(constants.signals).find(([, v]) => v === n)?.[0];
}
