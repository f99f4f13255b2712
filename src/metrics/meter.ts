import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { StateGauges, type StateSample } from './state-gauges.js';
import { LabelledHistogram, TupleCounter } from './hot.js';

/**
 * nasd's Prometheus metrics (`--metrics-listen`): one registry of its own, off until `enable()`. Until then every
 * method returns at once, so the layers that report events (fuse-ops, the committer, merges, maintenance) call
 * them unconditionally and pay a boolean test when metrics are off.
 *
 * Two kinds of numbers: events counted where they happen (FUSE requests, commits, merges, decisions, maintenance),
 * and gauges computed at scrape time from state nasd already keeps (branches, bytes, PRs, leases, runs, the
 * recycle area: `StateGauges`, fed by the sampler the daemon sets).
 */

/** Seconds: from a cached metadata answer (tens of microseconds) to a slow commit or a big write (seconds). */
const FUSE_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const COMMIT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const MERGE_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Time a PR waited for a person: a minute to a week. */
const WAIT_BUCKETS = [60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400];

export type MergeResult = 'merged' | 'conflict' | 'up_to_date' | 'error';

interface Instruments {
  fuseSeconds: LabelledHistogram;
  fuseErrors: TupleCounter;
  commits: Counter<string>;
  commitFailures: Counter<string>;
  commitLatency: Histogram<string>;
  commitBytes: Counter<string>;
  commitPaths: Counter<'change'>;
  merges: Counter<'by' | 'result'>;
  mergeSeconds: Histogram<string>;
  decisions: Counter<'decision'>;
  waitSeconds: Histogram<'decision'>;
  maintenanceRuns: Counter<'result'>;
  maintenancePurged: Counter<string>;
  maintenanceExpiredPrs: Counter<string>;
  maintenanceSeconds: Histogram<string>;
  maintenanceLast: Gauge<string>;
  gcRuns: Counter<'kind' | 'result'>;
}

export class Meter {
  private on = false;
  private registry: Registry | null = null;
  private m!: Instruments;
  private state!: StateGauges;
  private sampler: (() => Promise<StateSample>) | null = null;
  /** Where /metrics is served once it listens (nas status reports it). */
  url: string | null = null;

  get enabled(): boolean {
    return this.on;
  }

  /** Make the registry and every instrument, with Node's own metrics (memory, event-loop lag, GC) beside them. */
  enable(): Registry {
    if (this.registry) return this.registry;
    const registers = [(this.registry = new Registry())];
    collectDefaultMetrics({ register: this.registry });
    const counter = <L extends string>(name: string, help: string, labelNames: L[] = []) => new Counter<L>({ name, help, labelNames, registers });
    const histogram = <L extends string>(name: string, help: string, buckets: number[], labelNames: L[] = []) =>
      new Histogram<L>({ name, help, buckets, labelNames, registers });
    const gauge = <L extends string>(name: string, help: string, labelNames: L[] = []) => new Gauge<L>({ name, help, labelNames, registers });
    // The FUSE hot path's two: plain numbers per label, turned into prom-client's shape when scraped (hot.ts).
    const hot = <M extends LabelledHistogram | TupleCounter>(metric: M): M => {
      this.registry!.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
      return metric;
    };
    this.m = {
      fuseSeconds: hot(new LabelledHistogram('nas_fuse_request_duration_seconds', 'FUSE requests answered by nasd, by operation: time from the request reaching JavaScript to its answer (_count: requests)', 'op', FUSE_BUCKETS)),
      fuseErrors: hot(new TupleCounter('nas_fuse_errors_total', 'FUSE requests answered with an error, by Home, operation and errno (EROFS, EPERM, EACCES, EDQUOT: a rule said no; ENOENT: a name not there; home empty: the mount root)', ['home', 'op', 'errno'])),
      commits: counter('nas_commits_total', 'Commits made on branches from what was written through the mount'),
      commitFailures: counter('nas_commit_failures_total', 'Commit attempts that failed (the changes stay on disk and are retried)'),
      commitLatency: histogram('nas_commit_latency_seconds', 'From the first change a commit takes (a close, fsync or delete) to the commit on its branch', COMMIT_BUCKETS),
      commitBytes: counter('nas_commit_bytes_total', 'Bytes of the files and symlinks written in commits'),
      commitPaths: counter('nas_commit_paths_total', 'Paths committed, by change: written or deleted', ['change']),
      merges: counter('nas_merges_total', 'Agent PR merges into main, by who decided (policy or owner) and result (merged, conflict, up_to_date, error)', ['by', 'result']),
      mergeSeconds: histogram('nas_merge_duration_seconds', 'Time a merge into main took', MERGE_BUCKETS),
      decisions: counter('nas_pr_decisions_total', 'Decisions a person made on a PR: approve or reject', ['decision']),
      waitSeconds: histogram('nas_pr_wait_seconds', 'Time a PR waited for a person: from proposed to approved or rejected', WAIT_BUCKETS, ['decision']),
      maintenanceRuns: counter('nas_maintenance_runs_total', 'Maintenance passes over a Home (nas maintenance run, the daily timer), by result', ['result']),
      maintenancePurged: counter('nas_maintenance_purged_total', 'Recycle-area entries removed for good by maintenance and the hourly pass'),
      maintenanceExpiredPrs: counter('nas_maintenance_expired_prs_total', 'Waiting PRs maintenance found without a branch and marked expired'),
      maintenanceSeconds: histogram('nas_maintenance_duration_seconds', 'Time one Home\'s maintenance pass took (incl. git gc)', [0.1, 0.5, 1, 5, 10, 30, 60, 300, 900]),
      maintenanceLast: gauge('nas_maintenance_last_success_timestamp_seconds', 'When a maintenance pass last finished without error (Unix time)'),
      gcRuns: counter('nas_gc_runs_total', 'git gc of a Store: kind auto (after a purge) or pack (maintenance), by result', ['kind', 'result']),
    };
    this.state = new StateGauges(registers);
    this.on = true;
    return this.registry;
  }

  /** Scrape-time state (branches, bytes, PRs, leases, runs, recycle area) comes from here. */
  sampleWith(sampler: () => Promise<StateSample>): void {
    this.sampler = sampler;
  }

  /** The exposition (Prometheus text format), state gauges taken now. */
  async expose(): Promise<string> {
    if (!this.registry) throw new Error('metrics are off');
    if (this.sampler) this.state.set(await this.sampler());
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry?.contentType ?? 'text/plain; version=0.0.4; charset=utf-8';
  }

  // ---- FUSE ---------------------------------------------------------------------------------------

  /** When a FUSE request started (0 when metrics are off: no clock read). */
  start(): number {
    return this.on ? performance.now() : 0;
  }

  /** A FUSE request was answered (with a value or an errno); `started` from start(). */
  fuse(op: string, started: number): void {
    if (this.on) this.m.fuseSeconds.observe(op, (performance.now() - started) / 1000);
  }

  /** A FUSE request was answered with an error: the Home it named ('' for none), its errno's name (EROFS, ENOENT...). */
  fuseError(home: string, op: string, errno: string): void {
    if (this.on) this.m.fuseErrors.inc(home, op, errno);
  }

  // ---- commits, merges, decisions -----------------------------------------------------------------

  /** A commit landed: `latency` seconds since the first change it took, what it wrote and deleted. */
  commit(latency: number, bytes: number, written: number, deleted: number): void {
    if (!this.on) return;
    this.m.commits.inc();
    this.m.commitLatency.observe(latency);
    this.m.commitBytes.inc(bytes);
    if (written) this.m.commitPaths.labels('written').inc(written);
    if (deleted) this.m.commitPaths.labels('deleted').inc(deleted);
  }

  commitFailed(): void {
    if (this.on) this.m.commitFailures.inc();
  }

  /** A merge into main ended; `by` is policy or the owner (never a name: a label). */
  merge(by: 'policy' | 'owner', result: MergeResult, seconds: number): void {
    if (!this.on) return;
    this.m.merges.labels(by, result).inc();
    this.m.mergeSeconds.observe(seconds);
  }

  /** A person approved or rejected a PR that was proposed `waited` seconds before. */
  decided(decision: 'approve' | 'reject', waited: number): void {
    if (!this.on) return;
    this.m.decisions.labels(decision).inc();
    if (Number.isFinite(waited) && waited >= 0) this.m.waitSeconds.labels(decision).observe(waited);
  }

  // ---- maintenance ----------------------------------------------------------------------------------

  /** One Home's maintenance pass: what it purged and expired, how long (its Store's size is sampled at scrape). */
  maintained(r: { purged: number; expiredPrs: number; seconds: number }): void {
    if (!this.on) return;
    this.m.maintenanceRuns.labels('ok').inc();
    this.m.maintenancePurged.inc(r.purged);
    this.m.maintenanceExpiredPrs.inc(r.expiredPrs);
    this.m.maintenanceSeconds.observe(r.seconds);
    this.m.maintenanceLast.setToCurrentTime();
  }

  maintenanceFailed(): void {
    if (this.on) this.m.maintenanceRuns.labels('failed').inc();
  }

  /** Entries the hourly pass purged from a recycle area. */
  purged(n: number): void {
    if (this.on && n > 0) this.m.maintenancePurged.inc(n);
  }

  gc(kind: 'auto' | 'pack', ok: boolean): void {
    if (this.on) this.m.gcRuns.labels(kind, ok ? 'ok' : 'failed').inc();
  }
}

/** The one meter of this process. */
export const meter = new Meter();
