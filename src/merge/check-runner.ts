import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { sys } from '../util/sys.js';

/**
 * The process one custom check runs under: `node check-runner.js <uid> <gid> <dir> <executable>`, started by nasd
 * as root (check-sandbox.ts). It adopts every process the check leaves behind (a subreaper: an orphan, also one
 * that called setsid() or forked twice, becomes its child rather than init's), runs the executable in <dir> as
 * <uid>:<gid> with no supplementary groups and no way to gain privileges, with its own environment and output. When
 * the executable ends, or nasd closes this process's standard input (the time limit, or nasd gone), every process
 * it adopted is killed and reaped; then it exits with the executable's status (128 + N for signal N).
 *
 * Not a PID namespace: under the shipped unit nasd may make none (RestrictNamespaces=, no CAP_SYS_ADMIN), and a
 * subreaper needs no privilege. It runs as root, so the check's user cannot kill it and let its processes go.
 */

const [uid, gid, dir, executable] = process.argv.slice(2);

/** This process's children still running (a zombie is dead already), from /proc: ppid is field 4 of stat. */
function liveChildren(): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(ppid) === process.pid && state !== 'Z' && state !== 'X') pids.push(Number(name));
  }
  return pids;
}

/**
 * Kill every child, adopted or not, until none is left: each round kills all that run, then waits for one to end
 * (a child's own children come to this process as it dies, and are killed in the next round).
 */
function killAll(): void {
  const native = sys();
  for (;;) {
    for (const pid of liveChildren()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Ended meanwhile.
      }
    }
    if (native.reapChild(true) === -1) return;
  }
}

let ended = false;
function end(status: number): void {
  if (ended) return;
  ended = true;
  killAll();
  process.exit(status);
}

sys().becomeSubreaper();
const child = spawn('setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--no-new-privs', '--', executable], {
  cwd: dir, env: process.env, stdio: ['ignore', 'inherit', 'inherit'],
});
child.on('error', (err) => {
  process.stderr.write(`cannot run the check: ${err.message}\n`);
  end(127);
});
child.on('exit', (code, signal) => end(signal ? 128 + (constants.signals[signal] ?? 0) : (code ?? 1)));
// nasd closes standard input to stop the check (its time limit), and so does its going away.
process.stdin.on('data', () => undefined);
process.stdin.on('end', () => end(137));
process.stdin.on('error', () => end(137));
