import type { Logger } from 'pino';
import { fsError } from '../util/errors.js';

export interface OpenFileLimits {
  /** Files one user may hold open through the mount, in all views together. */
  perUser: number;
  /** Files that may be open in one view (a branch, main), whoever holds them. */
  perView: number;
  /** Files open through the mount in all: nasd's RLIMIT_NOFILE less the descriptors it keeps for itself. */
  total: number;
}

/** One cap: its counts by key, its limit, and the nasd.yaml setting that raises it. */
class Cap<K> {
  private readonly counts = new Map<K, number>();
  /** Keys whose refusal was logged: a caller looping on EMFILE writes one line until it closes a tenth of its files. */
  private readonly logged = new Set<K>();

  constructor(readonly limit: number, readonly setting: string, readonly code: 'EMFILE' | 'ENFILE') {}

  full(key: K, limit = this.limit): number | null {
    const n = this.counts.get(key) ?? 0;
    return n >= limit ? n : null;
  }

  /** Whether this refusal is the first since the key was last well below its limit. */
  firstRefusal(key: K): boolean {
    if (this.logged.has(key)) return false;
    this.logged.add(key);
    return true;
  }

  add(key: K, by: 1 | -1): void {
    const n = (this.counts.get(key) ?? 0) + by;
    if (n > 0) this.counts.set(key, n);
    else this.counts.delete(key);
    if (n < this.limit * 0.9) this.logged.delete(key);
  }
}

/**
 * Files held open through the mount, counted per user, per view and in all. An open file may hold one of nasd's
 * descriptors: without a cap one user holding ~20,000 files left nasd none, and then everyone's opens and every
 * commit (nas sync) failed. Past a cap the opener gets EMFILE (ENFILE past the total) and a log line says which
 * cap; the descriptors nasd keeps for itself (open_files_reserve) stay free. Readers who may not change the view
 * (no lease on it, not its owner, not root) share a part of the total, each a quarter of open_files_per_user:
 * three of them holding 4,096 files each left root ENFILE, with the rest for the owner and the lease holders.
 */
export class OpenFiles {
  private readonly perUser: Cap<number>;
  private readonly perView: Cap<string>;
  private readonly total: Cap<'all'>;
  /** Files the readers hold, in all. */
  private readonly readers: Cap<'all'>;
  private readonly perReader: number;

  constructor(limits: OpenFileLimits, private readonly log: Logger) {
    this.perUser = new Cap(limits.perUser, 'open_files_per_user', 'EMFILE');
    this.perView = new Cap(limits.perView, 'open_files_per_branch', 'EMFILE');
    this.total = new Cap(limits.total, 'open_files_reserve', 'ENFILE');
    this.readers = new Cap(Math.max(1, Math.floor((limits.total * 3) / 4)), 'open_files_reserve', 'ENFILE');
    this.perReader = Math.max(1, Math.floor(limits.perUser / 4));
  }

  /**
   * Count one more file open for uid in view, or refuse it; the function returned gives it back (once). `writer`:
   * uid may change the view (root, the Home's owner, a write lease's principal).
   */
  take(uid: number, view: string, writer = true): () => void {
    this.check(this.perUser, uid, { uid }, writer ? undefined : this.perReader);
    this.check(this.perView, view, { uid, view });
    if (!writer) this.check(this.readers, 'all', { uid, reader: true });
    this.check(this.total, 'all', { uid });
    this.perUser.add(uid, 1);
    this.perView.add(view, 1);
    this.total.add('all', 1);
    if (!writer) this.readers.add('all', 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.perUser.add(uid, -1);
      this.perView.add(view, -1);
      this.total.add('all', -1);
      if (!writer) this.readers.add('all', -1);
    };
  }

  private check<K>(cap: Cap<K>, key: K, who: Record<string, unknown>, limit?: number): void {
    const open = cap.full(key, limit);
    if (open === null) return;
    if (cap.firstRefusal(key)) {
      this.log.warn({ ...who, open, limit: limit ?? cap.limit, setting: cap.setting }, `too many files open through the mount: more opens get ${cap.code} until some are closed`);
    }
    throw fsError(cap.code, `${open} files are open, the most ${cap.setting} allows${limit !== undefined || who.reader ? ' one without a lease on the view' : ''}`);
  }
}
