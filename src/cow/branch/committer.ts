import fs from 'node:fs/promises';
import { constants, type Stats } from 'node:fs';
import type { Logger } from 'pino';
import { MODE, type Entry, type Identity, type Store } from '../../store/store.js';
import { formatMeta, metaPath } from '../../store/file-meta.js';
import { branchRef } from '../../store/refs.js';
import type { Trash } from '../../trash/trash.js';
import { mapLimit } from '../../util/concurrency.js';
import { hasCode } from '../../util/errors.js';
import { gitModeOf } from '../attr.js';
import { GitLayer } from '../git-layer.js';
import type { Handle } from '../view.js';
import type { Deletions } from './deletions.js';
import { Flusher } from './flusher.js';
import type { Overlay } from './overlay.js';
import { isFuseHidden } from './paths.js';
import { hasGitRefusedName } from '../../policy/policy.js';

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
 * Turns a branch's pending changes into commits: versioned paths written since the last commit (dirty),
 * whiteouts, and deletions, batched by the flusher into one commit each window; then the deletions go to
 * the recycle area.
 */
export class Committer {
  /** Versioned paths whose upper content is not committed yet, with the generation that marked them. */
  readonly dirty = new Map<string, number>();
  /** Handles open for writing, so that sync can include what they wrote before their release arrives. */
  readonly writers = new Set<Handle>();
  /** Paths a commit left out because git ignores them: looked at again when a .gitignore changes. */
  private readonly ignored = new Set<string>();
  private readonly flusher: Flusher;
  /** Closed (shut down, or the branch discarded): late releases from still-open files commit nothing. */
  private closed = false;

  constructor(private readonly ctx: CommitterContext, private readonly overlay: Overlay, private readonly deletions: Deletions) {
    this.flusher = new Flusher(() => this.commitPending(), ctx.windowMs, (err) =>
      // A file renamed or deleted while its commit was being made is an expected race: the next pass has it.
      hasCode(err, 'ENOENT')
        ? ctx.log.debug({ err, view: ctx.name }, 'a file went away during the commit; retrying')
        : ctx.log.error({ err, view: ctx.name }, 'commit failed; changes kept on disk, will retry'),
    );
    overlay.ignore.onChange = () => {
      const again = [...this.ignored];
      this.ignored.clear();
      for (const p of again) this.markDirty(p);
    };
  }

  get pendingChanges(): number {
    return this.dirty.size + this.overlay.whiteouts.size + this.deletions.waiting.length;
  }

  markDirty(rel: string): void {
    if (this.closed || this.overlay.scratch(rel) || isFuseHidden(rel)) return;
    this.overlay.ignore.changed(rel);
    this.dirty.set(rel, this.overlay.next());
    this.flusher.schedule();
  }

  /** What a handle wrote is queued for the next commit. */
  queue(h: Handle): void {
    if (!h.dirty) return;
    h.dirty = false;
    this.markDirty(h.rel);
  }

  schedule(delayMs?: number): void {
    if (!this.closed) this.flusher.schedule(delayMs);
  }

  flushNow(): Promise<void> {
    return this.flusher.flushNow();
  }

  /**
   * Commit everything pending now and wait for it (`nas sync`, shutdown). Files still open include what
   * they wrote so far: the kernel sends the release of a closed file asynchronously.
   */
  sync(): Promise<void> {
    for (const h of this.writers) this.queue(h);
    return this.flusher.flushNow();
  }

  /** Stop the batching timer (shutdown); pending changes stay on disk for the next start. */
  stop(): void {
    this.closed = true;
    this.flusher.stop();
  }

  /** One commit for everything dirty, deleted and hidden since the last one; then the deletions to the recycle area. */
  private async commitPending(): Promise<void> {
    if (this.pendingChanges === 0) return;
    const { store } = this.ctx;
    const dirty = [...this.dirty];
    const whiteouts = [...this.overlay.whiteouts];
    const deletions = this.deletions.waiting.slice();
    const head = this.overlay.layer.commit;
    // Deletions first, then what is written: "rm -r d; mkdir d; echo > d/f" must end with d/f in the tree.
    const changes = new Map<string, Entry | null>();
    for (const [path] of whiteouts) if (await store.lookupPath(head.tree, path)) changes.set(path, null);
    const deleted = [...changes.keys()];
    const deletedSet = new Set(deleted);
    // A deleted path's metadata records go with it.
    for (const path of deleted) if (await store.lookupPath(head.tree, metaPath(path))) changes.set(metaPath(path), null);
    // What .gitignore matches and git does not track stays on disk, uncommitted.
    const snapshots = await mapLimit(dirty, 16, async ([path]) => ((await this.overlay.scratchAt(path)) ? 'ignored' as const : this.snapshot(path)));
    const written: string[] = [];
    let bytes = 0;
    for (const [i, [path]] of dirty.entries()) {
      const snap = snapshots[i];
      if (snap === 'ignored') this.ignored.add(path);
      if (!snap || snap === 'ignored') continue;
      this.ignored.delete(path);
      changes.delete(path);
      changes.set(path, snap.entry);
      // What git does not keep of the file goes into its record beside the tree (file-meta.ts); a path that is
      // no longer a regular file (now a symlink) loses its record.
      const [before, beforeRecord] = await Promise.all([store.lookupPath(head.tree, path), store.lookupPath(head.tree, metaPath(path))]);
      if (snap.record) changes.set(metaPath(path), snap.record);
      else if (beforeRecord) changes.set(metaPath(path), null);
      // Named in the message and the log only when it changed (after a crash every file left on disk is looked at).
      const same = before?.oid === snap.entry.oid && before.mode === snap.entry.mode && beforeRecord?.oid === snap.record?.oid;
      if (same && !deletedSet.has(path)) continue;
      written.push(path);
      bytes += snap.bytes;
    }
    const message = commitMessage(written, deleted.filter((p) => changes.get(p) === null), this.ctx.branch, this.ctx.runId);
    const started = process.hrtime.bigint();
    const commit = await store.commitChanges(branchRef(this.ctx.branch), { head: head.oid, changes, message, author: this.ctx.identity });
    // Files the branch did not change keep showing the time they had: their times do not move with every commit.
    if (commit) this.overlay.layer = new GitLayer(store, await store.readCommit(commit), this.overlay.layer.time);
    // One line per commit, for an operator: what went in and how long it took.
    this.ctx.log.info({
      view: this.ctx.name, commit, written: written.length, deleted: deleted.length, bytes, ms: Number(process.hrtime.bigint() - started) / 1e6,
    }, 'commit');
    await this.ctx.trash.add(this.deletions.items(deletions));
    // Forget what is committed, unless it changed again while the commit was being made.
    for (const [p, g] of dirty) if (this.dirty.get(p) === g) this.dirty.delete(p);
    for (const [p, g] of whiteouts) if (this.overlay.whiteouts.get(p) === g) this.overlay.whiteouts.delete(p);
    await this.deletions.settle(deletions);
  }

  /** The git entry for an upper file, or null if it is gone (renamed or deleted since: that change is pending too). */
  async hashUpper(path: string): Promise<Entry | null> {
    return (await this.snapshot(path))?.entry ?? null;
  }

  /**
   * An upper file as a commit takes it: its git entry and, for a regular file, its metadata record, both
   * from one look at the opened file. Null when it is gone or git cannot hold it.
   */
  private async snapshot(path: string): Promise<{ entry: Entry; record: Entry | null; bytes: number } | null> {
    const file = this.overlay.up(path);
    let st: Stats;
    try {
      st = await fs.lstat(file);
    } catch {
      return null;
    }
    // Only files and symlinks go into git: a FIFO or socket moved here from scratch is never opened.
    if (!(st.isFile() || st.isSymbolicLink()) || isFuseHidden(path)) return null;
    // A name git would refuse must not stop the commit of everything else: it stays on disk, uncommitted.
    if (hasGitRefusedName(path)) {
      this.ctx.log.warn({ view: this.ctx.name, path }, 'not committed: git refuses this name in a tree (it stays in the upper directory)');
      return null;
    }
    if (st.isSymbolicLink()) return { entry: { oid: await this.ctx.store.writeBlob(await fs.readlink(file)), mode: MODE.link }, record: null, bytes: st.size };
    const fh = await openForCommit(file);
    if (!fh) return null;
    try {
      const now = await fh.stat({ bigint: true });
      if (!now.isFile()) return null;
      const oid = now.size <= READ_IN_FULL ? await this.ctx.store.writeBlob(await fh.readFile()) : await this.ctx.store.writeBlobFromFd(fh.fd);
      const meta = formatMeta({ mode: Number(now.mode), uid: Number(now.uid), gid: Number(now.gid), atimeNs: now.atimeNs, mtimeNs: now.mtimeNs });
      return { entry: { oid, mode: gitModeOf(now) }, record: { oid: await this.ctx.store.writeBlob(meta), mode: MODE.file }, bytes: Number(now.size) };
    } finally {
      await fh.close();
    }
  }
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

/** A subject naming the changed paths, a body listing all of them, and trailers for branch and run. */
export function commitMessage(written: string[], deleted: string[], branch: string, runId?: string): string {
  // A path with a newline or other control character is quoted, so it cannot add lines (or trailers).
  const q = (p: string) => (/[\x00-\x1f\x7f]/.test(p) ? JSON.stringify(p) : p);
  written = written.map(q);
  deleted = deleted.map(q);
  const all = [...written, ...deleted];
  const shown = all.slice(0, 3).join(', ');
  const subject = all.length === 1 ? `nasd: ${written.length ? 'write' : 'delete'} ${shown}` : `nasd: ${all.length} paths: ${shown}${all.length > 3 ? ', ...' : ''}`;
  const lines = [...written.map((p) => `write  ${p}`), ...deleted.map((p) => `delete ${p}`)];
  const body = lines.length > 1000 ? [...lines.slice(0, 1000), `... and ${lines.length - 1000} more`] : lines;
  const trailers = [`Nas-Branch: ${branch}`, ...(runId ? [`Nas-Run: ${runId}`] : [])];
  return `${subject}\n\n${body.join('\n')}\n\n${trailers.join('\n')}\n`;
}
