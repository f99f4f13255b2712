import fs from 'node:fs/promises';
import type { TrashItem } from '../../trash/trash.js';
import type { Overlay } from './overlay.js';
import { PendingLog, type PendingEntry } from './pending-log.js';
import type { BranchState } from './state.js';
import { parentOf } from './paths.js';

export type Deletion = Extract<PendingEntry, { type: 'delete' }>;
type Whiteout = Extract<PendingEntry, { type: 'whiteout' }>;

/**
 * Deletions and whiteouts of a branch, logged before they happen: after a crash the log says what may have
 * happened, and recovery checks. A deleted file that only the upper directory held is parked in `deleted/`
 * until the recycle area has it.
 */
export class Deletions {
  /** Waiting to reach the recycle area, oldest first. */
  private readonly waiting: Deletion[] = [];
  private readonly log: PendingLog;
  private lock: Promise<unknown> = Promise.resolve();
  /**
   * Folders being emptied: when the first deletion below each happened since anything below it was last
   * written, and the folder's metadata record as it was then (deleting in it moves its times). An rmdir stamps
   * both on the folder's record: what `rm -r` deleted below the folder on the way to removing it is then
   * recognised in the recycle area as deleted with it (trash.ts contentsOf), and the folder comes back as it
   * was before. Kept in memory: a restart in the middle of an `rm -r` leaves the folder's record with its own
   * time only.
   */
  private readonly emptying = new Map<string, Pass>();

  /** Whiteouts are the state's: hidden here, kept in the log for as long as the state holds them. */
  constructor(
    private readonly overlay: Overlay,
    private readonly state: Pick<BranchState, 'hide' | 'forget' | 'whiteoutPaths'>,
    private readonly parked: string,
    logFile: string,
  ) {
    this.log = new PendingLog(logFile);
  }

  /** How many deletions wait to reach the recycle area. */
  get count(): number {
    return this.waiting.length;
  }

  /** What a commit takes to the recycle area: the deletions waiting now (settle them after). */
  batch(): Deletion[] {
    return this.waiting.slice();
  }

  /** Replay the log: whiteouts hide git's copies again; deletions whose parking never happened are dropped. */
  async recover(): Promise<void> {
    const referenced = new Set<string>();
    for (const e of await this.log.load()) {
      if (e.type === 'whiteout') {
        this.state.hide(e.path);
        continue;
      }
      if (e.parked) {
        // Logged but never parked: the unlink did not complete and the file is still in place.
        if (!(await exists(this.parkedFile(e)))) continue;
        referenced.add(e.record.id);
      }
      this.waiting.push(e);
      if (e.whiteout) this.state.hide(e.record.path);
    }
    for (const name of await fs.readdir(this.parked)) {
      if (!referenced.has(name)) await fs.rm(`${this.parked}/${name}`, { force: true });
    }
  }

  private parkedFile(d: Deletion): string {
    return this.parkedAt(d.record.id);
  }

  /** Where the content of deletion `id` is parked until the recycle area has it. */
  parkedAt(id: string): string {
    return `${this.parked}/${id}`;
  }

  /** Serialise changes to the log with its rewrite after a commit. */
  withLock<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  /**
   * Log first, then act. `prepare` runs under the log lock, so what it looked up cannot change before the
   * deletion is logged. A versioned deletion always hides git's copy: a commit already under way may be
   * adding the path. A whiteout entry instead of a deletion removes without a recycle record (nothing to restore).
   */
  async record(prepare: () => Promise<{ entry: Deletion | Whiteout; act: () => Promise<void> }>): Promise<void> {
    await this.withLock(async () => {
      const { entry, act } = await prepare();
      await this.log.append([entry]);
      await act();
      const path = entry.type === 'delete' ? entry.record.path : entry.path;
      if (entry.type === 'delete') this.waiting.push(entry);
      if (entry.type === 'whiteout' || entry.whiteout) this.state.hide(path);
      this.overlay.ignore.changed(path);
      this.state.forget(path);
    });
  }

  /**
   * A deletion at rel (of a folder emptied since `since`) is about to happen: each folder above it that no
   * pass is emptying yet starts one, with its record as it is now (`metaOf`). Call in a deletion's prepare.
   */
  async passBegins(rel: string, since: string, metaOf: (dir: string) => Promise<string | undefined>): Promise<void> {
    for (let dir = parentOf(rel); dir !== ''; dir = parentOf(dir)) {
      if (!this.emptying.has(dir)) this.emptying.set(dir, { since, meta: await metaOf(dir) });
    }
  }

  /**
   * The pass that emptied folder rel, which its removal ends: when it began and the folder's record then (its
   * own deletion's time and nothing when nothing below it was deleted). Call in the rmdir's prepare.
   */
  passEnds(rel: string, now: string): Pass {
    const pass = this.emptying.get(rel) ?? { since: now };
    for (const dir of this.emptying.keys()) if (dir === rel || dir.startsWith(`${rel}/`)) this.emptying.delete(dir);
    return pass;
  }

  /** Something was written at rel: a deletion below its folders from now on starts a new pass. */
  written(rel: string): void {
    if (this.emptying.size === 0) return;
    for (let dir = parentOf(rel); dir !== ''; dir = parentOf(dir)) this.emptying.delete(dir);
    this.emptying.delete(rel);
  }

  /** Hide git's copies of paths (a rename's source, a replaced directory), logged first. */
  async hide(paths: string[]): Promise<void> {
    await this.withLock(async () => {
      await this.log.append(paths.map((path) => ({ type: 'whiteout' as const, path })));
      for (const p of paths) this.state.hide(p);
    });
  }

  /** What the recycle area needs for these deletions: the record, and the parked content if any. */
  items(list: Deletion[]): TrashItem[] {
    return list.map((d) => ({ record: d.record, contentFile: d.parked ? this.parkedFile(d) : undefined }));
  }

  /** After a commit filed `done` in the recycle area: drop them, rewrite the log with what is still pending. */
  async settle(done: Deletion[]): Promise<void> {
    this.waiting.splice(0, done.length);
    await this.withLock(() => this.log.rewrite(this.entries()));
    for (const d of done) if (d.parked) await fs.rm(this.parkedFile(d), { force: true });
  }

  private entries(): PendingEntry[] {
    const fromDeletions = new Set(this.waiting.filter((d) => d.whiteout).map((d) => d.record.path));
    const rest: PendingEntry[] = this.state.whiteoutPaths()
      .filter((p) => !fromDeletions.has(p))
      .map((path) => ({ type: 'whiteout', path }));
    return [...rest, ...this.waiting];
  }

  close(): Promise<void> {
    return this.log.close();
  }
}

interface Pass {
  since: string;
  meta?: string;
}

async function exists(path: string): Promise<boolean> {
  try {
    await fs.lstat(path);
    return true;
  } catch {
    return false;
  }
}
