import { closeSync, fstatSync, openSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Processes by PID namespace, from /proc (the caller's view of it): a run lives in a namespace of its own, so
 * its processes are exactly those whose /proc/<pid>/ns/pid names it.
 */

/** A process's PID namespace, as `pid:[4026532177]`, or null when it is gone. */
export function namespaceOf(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

/**
 * The processes in a namespace; without its init (the process that is 1 inside it) when `withInit` is false.
 * NSpid in /proc/<pid>/status lists a process's pid in each namespace, outermost first.
 */
export function namespaceMembers(ns: string, withInit: boolean): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || namespaceOf(Number(name)) !== ns) continue;
    if (!withInit) {
      const nspid = readFileSafe(`/proc/${name}/status`).match(/^NSpid:\s+(.*)$/m)?.[1].trim().split(/\s+/);
      if (!nspid || nspid.at(-1) === '1') continue;
    }
    pids.push(Number(name));
  }
  return pids;
}

/**
 * Keep a PID namespace in being until `release`, through /proc/<pid>/ns/pid of a process in it; null when none is
 * left. The kernel gives a freed namespace's number (the inode in `pid:[…]`) to the next namespace made, at once:
 * whatever knows a run by that number must hold its namespace, or the next run's processes pass for the last one's.
 */
export function holdNamespace(ns: string): { release(): void } | null {
  const inode = Number(/^pid:\[(\d+)\]$/.exec(ns)?.[1]);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || namespaceOf(Number(name)) !== ns) continue;
    let fd: number;
    try {
      fd = openSync(`/proc/${name}/ns/pid`, 'r');
    } catch {
      continue; // it ended meanwhile
    }
    // The pid may have been reused between the readlink and the open: the descriptor must name this namespace.
    if (fstatSync(fd).ino === inode) return { release: () => closeSync(fd) };
    closeSync(fd);
  }
  return null;
}

/**
 * A process's start time (field 22 of /proc/<pid>/stat), so a reused pid is not mistaken for the process it
 * was; null when it is gone.
 */
export function startTimeOf(pid: number): string | null {
  const stat = readFileSafe(`/proc/${pid}/stat`);
  // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
  return stat ? (stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null) : null;
}

function readFileSafe(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
