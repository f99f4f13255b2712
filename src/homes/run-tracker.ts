import { holdNamespace, namespaceMembers } from '../util/pid-namespace.js';
import { UserError } from '../util/errors.js';
import { sys } from '../util/sys.js';

/**
 * Which run a process belongs to. Each run lives in its own PID namespace (nas run makes it), so a
 * process is the run's exactly when that namespace is its own or one above it: children, daemons it starts,
 * re-parented orphans and whatever runs in a namespace made inside the run (unshare -p) included, with no walk
 * up the process tree. Read once per request that needs it (a few microseconds), only while a run is active;
 * the binding decides the same way for what it answers itself (native/pidns.cc). A run's namespace is held open
 * while it is tracked: its number then names no other namespace, even after the run's last process ended.
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
  /** Each tracked run's hold on its namespace, by run id. */
  private readonly held = new Map<string, { release(): void }>();
  /** Told when a run starts (true) or ends: the mount answers a run's processes from its cache only in its views. */
  onChange?: (run: ActiveRun, active: boolean) => void;

  /** Track a run by its namespace, which must still have a process in it (the run's set-up waits in it). */
  add(run: ActiveRun): void {
    const other = this.byNs.get(run.ns);
    if (other?.id === run.id) return;
    if (other) throw new UserError(`${run.ns} is run ${other.id}'s namespace already`, 409);
    const hold = holdNamespace(run.ns);
    if (!hold) throw new UserError(`no process is left in ${run.ns}: run ${run.id} cannot be attached to it`, 409);
    this.held.set(run.id, hold);
    this.byNs.set(run.ns, run);
    this.onChange?.(run, true);
  }

  remove(id: string): ActiveRun | undefined {
    const run = this.all().find((r) => r.id === id);
    if (run) {
      this.byNs.delete(run.ns);
      this.onChange?.(run, false);
    }
    // Let go last: once no one keys on the number, the kernel may give it to another namespace.
    this.held.get(id)?.release();
    this.held.delete(id);
    return run;
  }

  all(): ActiveRun[] {
    return [...this.byNs.values()];
  }

  /** The run a process belongs to, if any. */
  runOf(pid: number): ActiveRun | undefined {
    if (this.byNs.size === 0 || !(pid > 0)) return undefined;
    for (const ns of sys().pidNamespaces(pid)) {
      const run = this.byNs.get(ns);
      if (run) return run;
    }
    return undefined;
  }

  /** The processes of a run (to stop what is left when its launcher died). */
  members(run: ActiveRun): number[] {
    return namespaceMembers(run.ns, true);
  }
}
