/**
 * Batches changes into commits: the first change in a quiet period starts a short window, and everything
 * that arrives in it becomes one commit. The window is never shorter than the last commit took, so a
 * stream of writes into a large directory spends at most about half its time committing. `flushNow`
 * (fsync, sync, shutdown) commits at once and resolves only when everything marked before it is committed.
 */
export class Flusher {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private queued: Promise<void> | null = null;
  private failures = 0;
  private lastMs = 0;

  constructor(
    private readonly commit: () => Promise<void>,
    private readonly windowMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** A change happened: commit it within the window. */
  schedule(delayMs = Math.max(this.windowMs, this.lastMs)): void {
    if (this.timer || this.queued) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flushNow().catch(() => undefined);
    }, delayMs);
  }

  flushNow(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (!this.running) return this.start();
    // A flush is under way and may have missed the latest changes: queue one more, shared by every waiter.
    this.queued ??= this.running.then(() => {
      this.queued = null;
      return this.start();
    });
    return this.queued;
  }

  private start(): Promise<void> {
    const started = Date.now();
    const run = this.commit().then(
      () => {
        this.failures = 0;
        this.lastMs = Date.now() - started;
      },
      (err) => {
        this.failures++;
        this.onError(err);
        // Keep the changes and try again later, backing off up to a minute.
        this.schedule(Math.min(60_000, this.windowMs * 2 ** this.failures));
        throw err;
      },
    );
    // `running` never rejects: it only tells whether a flush is under way.
    const settled: Promise<void> = run.catch(() => undefined).then(() => {
      if (this.running === settled) this.running = null;
    });
    this.running = settled;
    return run;
  }

  /** Stop the timer (shutdown); pending changes stay on disk for the next start. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
