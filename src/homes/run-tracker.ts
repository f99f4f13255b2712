import { namespaceMembers, namespaceOf } from '../util/pid-namespace.js';

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
  /** Told when a run starts (true) or ends: the mount answers a run's processes from its cache only in its views. */
  onChange?: (run: ActiveRun, active: boolean) => void;

  add(run: ActiveRun): void {
    this.byNs.set(run.ns, run);
    this.onChange?.(run, true);
  }

  remove(id: string): ActiveRun | undefined {
    const run = this.all().find((r) => r.id === id);
    if (run) {
      this.byNs.delete(run.ns);
      this.onChange?.(run, false);
    }
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
    return namespaceMembers(run.ns, true);
  }
}
