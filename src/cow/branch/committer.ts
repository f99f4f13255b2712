import fs from 'node:fs/promises';
import { constants, type BigIntStats } from 'node:fs';
import type { Logger } from 'pino';
import { MODE, type Entry, type Identity, type Store } from '../../store/store.js';
import { dirMetaPath, formatMeta, metaPath, type FileMeta } from '../../store/file-meta.js';
import { branchRef } from '../../store/refs.js';
import type { Trash } from '../../trash/trash.js';
import { describeUids } from '../../util/accounts.js';
import { mapLimit } from '../../util/concurrency.js';
import { fsError, hasCode, isDiskFull } from '../../util/errors.js';
import { nearlyFull } from '../../util/disk.js';
import { gitModeOf } from '../attr.js';
import { GitLayer } from '../git-layer.js';
import type { Deletions } from './deletions.js';
import { Flusher } from './flusher.js';
import type { Overlay } from './overlay.js';
import { parentOf } from './paths.js';
import type { BranchState } from './state.js';
import { hasUnstorableName } from '../../policy/policy.js';
import { meter } from '../../metrics/meter.js';

export interface CommitterContext {
  branch: string;
  store: Store;
  trash: Trash;
  identity: Identity;
  runId?: string;
  windowMs: number;
  log: Logger;
  /** For log lines. */
  name: string;
}

/**
 * Turns a branch's pending changes into commits: versioned paths written since the last commit (the state's
 * dirty paths), whiteouts, and deletions, batched by the flusher into one commit each window; then the
 * deletions go to the recycle area.
 */
export class Committer {
  /** The accounts (uids) whose calls changed the branch since the last commit: its Nas-Writers trailer. */
  private changers = new Set<number>();
  /** Paths a commit left out because git ignores them: looked at again when a .gitignore changes. */
  private readonly ignored = new Set<string>();
  private readonly flusher: Flusher;
  /** Closed (shut down, or the branch discarded): late releases from still-open files commit nothing. */
  private closed = false;
  /** When the oldest change not committed yet was queued (performance.now() ms; 0: none): the commit latency's start. */
  private queuedAt = 0;

  constructor(
    private readonly ctx: CommitterContext,
    private readonly overlay: Overlay,
    private readonly deletions: Deletions,
    private readonly state: Pick<BranchState, 'markDirty' | 'isDirty' | 'pending' | 'taken' | 'committed'>,
  ) {
    this.flusher = new Flusher(() => this.commitPending().catch((err) => this.explain(err)), ctx.windowMs, (err) => (
      meter.commitFailed(),
      // A file renamed or deleted while its commit was being made is an expected race: the next pass has it.
      hasCode(err, 'ENOENT')
        ? ctx.log.debug({ err, view: ctx.name }, 'a file went away during the commit; retrying')
        : hasCode(err, 'ENOSPC')
          ? ctx.log.warn({ view: ctx.name, why: (err as Error).message }, 'commit failed: the disk that holds the state directory is full; changes kept on disk, will retry')
          : ctx.log.error({ err, view: ctx.name }, 'commit failed; changes kept on disk, will retry')
    ));
  }

  /** The .gitignore rules may have changed: what a commit left out as ignored is looked at again. */
  ignoreRulesChanged(): void {
    const again = [...this.ignored];
    this.ignored.clear();
    for (const p of again) this.markDirty(p);
  }

  /**
   * A commit that failed for want of room says so (ENOSPC to fsync, a clear message to nas sync and propose):
   * libgit2 reports a full disk without an errno, and sometimes in no words at all.
   */
  private async explain(err: unknown): Promise<never> {
    if (!hasCode(err, 'ENOENT') && (isDiskFull(err) || (await nearlyFull(this.ctx.store.path)))) {
      throw fsError('ENOSPC', `${this.ctx.name}: no room to commit, the disk that holds the state directory is full; what was written stays on disk and is committed once there is room`);
    }
    throw err;
  }

  get pendingChanges(): number {
    return this.state.pending + this.deletions.count;
  }

  markDirty(rel: string): void {
    if (this.closed || this.overlay.scratch(rel)) return;
    this.overlay.ignore.changed(rel);
    this.deletions.written(rel);
    this.state.markDirty(rel);
    this.queued();
    this.flusher.schedule();
  }

  /** A change was queued for the next commit: the oldest one not committed starts the commit latency. */
  private queued(): void {
    if (this.queuedAt === 0 && meter.enabled) this.queuedAt = performance.now();
  }

  changedBy(uid: number): void {
    this.changers.add(uid);
  }

  schedule(delayMs?: number): void {
    if (this.closed) return;
    this.queued();
    this.flusher.schedule(delayMs);
  }

  flushNow(): Promise<void> {
    return this.flusher.flushNow();
  }

  /** Stop the batching timer (shutdown); pending changes stay on disk for the next start. */
  stop(): void {
    this.closed = true;
    this.flusher.stop();
  }

  /** One commit for everything dirty, deleted and hidden since the last one; then the deletions to the recycle area. */
  private async commitPending(): Promise<void> {
    if (this.pendingChanges === 0) {
      this.queuedAt = 0;
      return;
    }
    // Who changed the branch until now is named in this commit; who changes it from now on, in the next (and
    // its latency starts with the first change queued while this one is made).
    const changers = this.changers;
    this.changers = new Set();
    const queuedAt = this.queuedAt;
    this.queuedAt = 0;
    await this.commit(changers, queuedAt).catch((err) => {
      for (const uid of changers) this.changers.add(uid);
      if (queuedAt && (this.queuedAt === 0 || queuedAt < this.queuedAt)) this.queuedAt = queuedAt;
      throw err;
    });
  }

  private async commit(changers: Set<number>, queuedAt: number): Promise<void> {
    const { store } = this.ctx;
    const taken = this.state.taken();
    const { whiteouts } = taken;
    // A path hidden after it was written (a temp file renamed into place, rsync's or an editor's, while this
    // commit started) is not taken from the upper directory: what is there is the old name's content.
    const hiddenAt = new Map(whiteouts);
    const dirty = taken.dirty.filter(([p, g]) => !hiddenSince(hiddenAt, p, g));
    const deletions = this.deletions.batch();
    const head = this.overlay.layer.commit;
    // Deletions first, then what is written: "rm -r d; mkdir d; echo > d/f" must end with d/f in the tree.
    const changes = new Map<string, Entry | null>();
    for (const [path] of whiteouts) if (await store.lookupPath(head.tree, path)) changes.set(path, null);
    const deleted = [...changes.keys()];
    const deletedSet = new Set(deleted);
    // A deleted path's metadata records go with it, also a directory's that git no longer held (emptied, or it
    // never had a file): left behind, it would describe the next directory made there.
    for (const [path] of whiteouts) if (await store.lookupPath(head.tree, metaPath(path))) changes.set(metaPath(path), null);
    // A directory's record (its times) changes with what is made or removed in it: the parents that have one
    // are looked at too. Directories without one (made by the daemon to hold a copied file) get none here:
    // they go on showing the Home's owner.
    const parents = [...new Set([...dirty, ...whiteouts].map(([p]) => parentOf(p)))].filter((p) => p !== '' && !this.state.isDirty(p));
    const recorded = await mapLimit(parents, 16, async (p) => (await store.lookupPath(head.tree, dirMetaPath(p))) !== null);
    const paths = [...dirty.map(([p]) => p), ...parents.filter((_, i) => recorded[i])];
    // What .gitignore matches and git does not track stays on disk, uncommitted.
    const snapshots = await mapLimit(paths, 16, (path) => this.snapshot(path));
    const written: string[] = [];
    let bytes = 0;
    for (const [i, path] of paths.entries()) {
      const snap = snapshots[i];
      if (snap === 'ignored' && i < dirty.length) this.ignored.add(path);
      if (!snap || snap === 'ignored') continue;
      this.ignored.delete(path);
      // What git does not keep goes into the path's record beside the tree (file-meta.ts); a path that is no
      // longer what its record described (a file now a directory) loses it.
      const at = snap.entry ? metaPath(path) : dirMetaPath(path);
      const [before, beforeRecord] = await Promise.all([store.lookupPath(head.tree, path), store.lookupPath(head.tree, at)]);
      // A path whose content is as committed keeps its record if just its access time moved (someone read the
      // file or listed the folder, or a restart looked at what was left on disk): no change for a PR to show.
      const sameEntry = !snap.entry || (before?.oid === snap.entry.oid && before.mode === snap.entry.mode);
      // (Not one deleted and made again in this window: its deletion would stand.)
      const untouched = !changes.has(path) && !changes.has(at);
      if (sameEntry && untouched && beforeRecord && sameButAtime(snap.meta, await store.readMeta(beforeRecord.oid))) continue;
      if (snap.entry) {
        changes.delete(path);
        changes.set(path, snap.entry);
      }
      changes.delete(at);
      changes.set(at, snap.record);
      // Named in the message and the log only when it changed (after a crash every file left on disk is looked at).
      const same = sameEntry && beforeRecord?.oid === snap.record.oid;
      if (same && !deletedSet.has(path)) continue;
      written.push(snap.entry ? path : `${path}/`);
      bytes += snap.bytes;
    }
    const message = commitMessage(written, deleted.filter((p) => changes.get(p) === null), this.ctx.branch, this.ctx.runId, await describeUids(changers));
    const started = process.hrtime.bigint();
    const commit = await store.commitChanges(branchRef(this.ctx.branch), { head: head.oid, changes, message, author: this.ctx.identity });
    // Files the branch did not change keep showing the time they had: their times do not move with every commit.
    if (commit) this.overlay.setHead(new GitLayer(store, await store.readCommit(commit), this.overlay.layer.time));
    // One line per commit, for an operator: what went in and how long it took. A look that found nothing changed
    // (a restart looks at every file left on disk) is no commit: debug only.
    this.ctx.log[commit ? 'info' : 'debug']({
      view: this.ctx.name, commit, written: written.length, deleted: deleted.length, bytes, ms: Number(process.hrtime.bigint() - started) / 1e6,
    }, 'commit');
    if (commit) meter.commit(queuedAt ? (performance.now() - queuedAt) / 1000 : 0, bytes, written.length, deleted.length);
    await this.ctx.trash.add(this.deletions.items(deletions));
    // Forget what is committed, unless it changed again while the commit was being made.
    this.state.committed(taken);
    await this.deletions.settle(deletions);
  }

  /** The git entry for an upper file, or null if it is gone (renamed or deleted since: that change is pending too). */
  async hashUpper(path: string): Promise<Entry | null> {
    const snap = await this.snapshot(path);
    return (snap !== 'ignored' && snap?.entry) || null;
  }

  /**
   * An upper path as a commit takes it, from one look at it: a file's or symlink's git entry and record; a
   * directory's record alone (git keeps directories only as the paths of their files). Null when it is gone
   * or git cannot hold it; 'ignored' when it is scratch by a .gitignore rule.
   */
  private async snapshot(path: string): Promise<Snapshot | 'ignored' | null> {
    if (path === '') return this.snapshotAt(path, this.overlay.upper);
    // Looked at by name in its parent held open: a directory on the way swapped for a link is not followed.
    return this.overlay.tree.at(path, (file) => this.snapshotAt(path, file)).catch((e) => {
      if (hasCode(e, 'ENOENT') || hasCode(e, 'ENOTDIR') || hasCode(e, 'ELOOP')) return null;
      throw e;
    });
  }

  private async snapshotAt(path: string, file: string): Promise<Snapshot | 'ignored' | null> {
    let st: BigIntStats;
    try {
      st = await fs.lstat(file, { bigint: true });
    } catch {
      return null;
    }
    // Only files, symlinks and directories: a FIFO or socket moved here from scratch is never opened.
    if (!(st.isFile() || st.isSymbolicLink() || st.isDirectory())) return null;
    if (await this.overlay.scratchAt(path, st.isDirectory())) return 'ignored';
    // A name git would refuse must not stop the commit of everything else: it stays on disk, uncommitted.
    if (hasUnstorableName(path)) {
      this.ctx.log.warn({ view: this.ctx.name, path }, 'not committed: git refuses this name in a tree (it stays in the upper directory)');
      return null;
    }
    if (st.isDirectory()) return { record: await this.record(metaOf(st)), meta: metaOf(st), bytes: 0 };
    if (st.isSymbolicLink()) {
      const target = await fs.readlink(file);
      return { entry: { oid: await this.ctx.store.writeBlob(target), mode: MODE.link }, record: await this.record(metaOf(st)), meta: metaOf(st), bytes: Number(st.size) };
    }
    const fh = await openForCommit(file);
    if (!fh) return null;
    try {
      const now = await fh.stat({ bigint: true });
      if (!now.isFile()) return null;
      const oid = now.size <= READ_IN_FULL ? await this.ctx.store.writeBlob(await fh.readFile()) : await this.ctx.store.writeBlobFromFd(fh.fd);
      return { entry: { oid, mode: gitModeOf(now) }, record: await this.record(metaOf(now)), meta: metaOf(now), bytes: Number(now.size) };
    } finally {
      await fh.close();
    }
  }

  /** A metadata record as a blob. */
  private async record(meta: FileMeta): Promise<Entry> {
    return { oid: await this.ctx.store.writeBlob(formatMeta(meta)), mode: MODE.file };
  }
}

const metaOf = (st: BigIntStats): FileMeta => ({ mode: Number(st.mode), uid: Number(st.uid), gid: Number(st.gid), atimeNs: st.atimeNs, mtimeNs: st.mtimeNs });

/** Whether path or a folder above it was hidden after `generation` (the generation that marked it written). */
function hiddenSince(hiddenAt: Map<string, number>, path: string, generation: number): boolean {
  for (let p = path; p !== ''; p = parentOf(p)) if ((hiddenAt.get(p) ?? 0) > generation) return true;
  return false;
}

/** Whether two records differ in the access time at most. */
const sameButAtime = (a: FileMeta, b: FileMeta | null): boolean =>
  b !== null && a.mode === b.mode && a.uid === b.uid && a.gid === b.gid && a.mtimeNs === b.mtimeNs;

/** What a commit takes of one upper path: its git entry (none for a directory) and its metadata record. */
interface Snapshot {
  entry?: Entry;
  record: Entry;
  /** The record as read. */
  meta: FileMeta;
  bytes: number;
}

/** Files up to this size are read here without touching their access time; larger ones libgit2 reads itself. */
const READ_IN_FULL = 64n << 20n;

/**
 * Open an upper file to commit it: never through a symlink swapped in since it was looked at, never blocking
 * on a FIFO, and leaving its access time as its users left it (a commit is no one's read). Null: it is gone.
 */
async function openForCommit(file: string): Promise<fs.FileHandle | null> {
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  try {
    return await fs.open(file, flags | constants.O_NOATIME);
  } catch (e) {
    if (hasCode(e, 'ENOENT') || hasCode(e, 'ELOOP')) return null;
    return fs.open(file, flags); // O_NOATIME needs the file's owner or CAP_FOWNER
  }
}

/** A subject naming the changed paths, a body listing all of them, and trailers for branch, run and the accounts that wrote. */
export function commitMessage(written: string[], deleted: string[], branch: string, runId?: string, writers: string[] = []): string {
  // A path with a newline or other control character is quoted, so it cannot add lines (or trailers).
  const q = (p: string) => (/[\x00-\x1f\x7f]/.test(p) ? JSON.stringify(p) : p);
  written = written.map(q);
  deleted = deleted.map(q);
  const all = [...written, ...deleted];
  const shown = all.slice(0, 3).join(', ');
  const subject = all.length === 1 ? `nasd: ${written.length ? 'write' : 'delete'} ${shown}` : `nasd: ${all.length} paths: ${shown}${all.length > 3 ? ', ...' : ''}`;
  const lines = [...written.map((p) => `write  ${p}`), ...deleted.map((p) => `delete ${p}`)];
  const body = lines.length > 1000 ? [...lines.slice(0, 1000), `... and ${lines.length - 1000} more`] : lines;
  const trailers = [`Nas-Branch: ${branch}`, ...(runId ? [`Nas-Run: ${runId}`] : []), ...(writers.length ? [`Nas-Writers: ${writers.join(', ')}`] : [])];
  return `${subject}\n\n${body.join('\n')}\n\n${trailers.join('\n')}\n`;
}
