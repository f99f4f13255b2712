import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Which run a process belongs to. Each run lives in its own PID namespace (nas run makes it), so a
 * process is the run's exactly when /proc/<pid>/ns/pid names that namespace: children, daemons it starts
 * and re-parented orphans included, with no walk up the process tree. Read once per request that needs
 * it (a few microseconds), only while a run is active.
 */

export interface ActiveRun {
  id: string;
  role: string;
  branch: string;
  /** The namespace, as /proc/<pid>/ns/pid reads: `pid:[4026532177]`. */
  ns: string;
}

export class RunTracker {
  private readonly byNs = new Map<string, ActiveRun>();

  add(run: ActiveRun): void {
    this.byNs.set(run.ns, run);
  }

  remove(id: string): ActiveRun | undefined {
    const run = this.all().find((r) => r.id === id);
    if (run) this.byNs.delete(run.ns);
    return run;
  }

  all(): ActiveRun[] {
    return [...this.byNs.values()];
  }

  /** The run a process belongs to, if any. */
  runOf(pid: number): ActiveRun | undefined {
    if (this.byNs.size === 0 || !(pid > 0)) return undefined;
    const ns = namespaceOf(pid);
    return ns ? this.byNs.get(ns) : undefined;
  }

  /** The processes of a run (to stop what is left when its launcher died). */
  members(run: ActiveRun): number[] {
    return readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number).filter((pid) => namespaceOf(pid) === run.ns);
  }
}

export function namespaceOf(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

/**
 * A process's start time (field 22 of /proc/<pid>/stat), so a reused pid is not mistaken for the process it
 * was; null when it is gone.
 */
export function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}
