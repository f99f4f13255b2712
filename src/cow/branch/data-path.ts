import { constants } from 'node:fs';
import { fsError, hasCode } from '../../util/errors.js';
import { checkAppend, checkOpenForWrite, isAppendOnly } from '../../policy/policy.js';
import type { Caller } from '../../util/owner.js';
import * as fsx from '../fsx.js';
import { contentHandle, readContent, type GrantDesk, type Handle, type WriteHandle } from '../view.js';
import type { Committer } from './committer.js';
import type { CopyUp } from './copy-up.js';
import { isDir, type Overlay } from './overlay.js';
import { ownNewFile } from './ownership.js';
import { parentOf } from './paths.js';
import type { ReadManifest } from './read-manifest.js';
import type { BranchState } from './state.js';
import { overQuota } from './usage.js';
import { WriteGrants } from './write-grants.js';

const OPEN_FLAGS = 3 | constants.O_APPEND | constants.O_TRUNC;
/**
 * Added to every open of an upper file (fsx opens synchronously): a FIFO swapped in for a file meanwhile then
 * answers at once instead of blocking the thread that serves the mount. A regular file ignores it.
 */
const NEVER_WAIT = constants.O_NONBLOCK;

/**
 * The per-descriptor data path of a branch view: open and create give a handle of the open's mode (content
 * from git, a read-only or a writing descriptor on the upper directory), and read, write, ftruncate, release
 * and fsync work on it. Bytes are counted per path (usage.ts), never per descriptor: two descriptors on one
 * file, or a truncate by name beside an open one, see the same size. A writing descriptor writes while the
 * lease it was opened under lasts and the branch has not expired; what it wrote is queued for the next commit
 * at its release, fsync, or a sync. A writing descriptor's writes may be answered by the binding alone, within
 * a grant (write-grants.ts) that ends before anything else here looks at the file.
 */
export class DataPath {
  /** The write leases in force (setLeases): the newest owns the view; a descriptor writes while its own lasts. */
  private leasesInForce = new Set<string>();
  private newestLease?: string;
  private readonly grants: WriteGrants;

  constructor(
    private readonly overlay: Overlay,
    private readonly copy: CopyUp,
    private readonly committer: Committer,
    private readonly state: Pick<BranchState, 'usage' | 'refuseIfExpired' | 'refuseIfGone' | 'gone' | 'expired' | 'opened' | 'closed' | 'openWriters' | 'writersAt' | 'made'>,
    /** What the run read from git through the view. */
    private readonly reads: () => ReadManifest,
    /** A writer is named in the next commit (Nas-Writers). */
    changedBy: (uid: number) => void,
  ) {
    this.grants = new WriteGrants(
      state.usage, (rel, below) => state.writersAt(rel, below), () => state.openWriters(), (h) => this.mayWrite(h), changedBy,
    );
  }

  /** The write leases in force, newest first. */
  setLeases(ids: string[]): void {
    this.leasesInForce = new Set(ids);
    this.newestLease = ids[0];
    this.grants.revokeAll((h) => !h.lease || this.leasesInForce.has(h.lease));
  }

  /** h, open for writing as handle `fh` by `uid`: the binding may answer its writes (write-grants.ts). */
  offerWrites(h: Handle, fh: number, desk: GrantDesk, uid: number): void {
    if (h.mode === 'write') this.grants.offer(h, fh, desk, uid);
  }

  /** Every grant at rel (and below it) ends: its name is about to be removed or renamed. */
  settleAt(rel: string, below = false): void {
    this.grants.revokeAt(rel, below);
  }

  /** Every grant ends (the branch expired or is discarded); `closing`: none is made again. */
  revokeGrants(closing = false): void {
    if (closing) this.grants.stop();
    else this.grants.revokeAll();
  }

  async open(rel: string, flags: number): Promise<Handle> {
    const writing = (flags & 3) !== constants.O_RDONLY || (flags & constants.O_TRUNC) !== 0;
    const node = await this.overlay.need(rel);
    if (isDir(node)) {
      if (writing) throw fsError('EISDIR');
      return contentHandle(rel, Buffer.alloc(0));
    }
    if (!writing) {
      if (node.stat) {
        const fd = await this.overlay.tree.at(rel, (p) => fsx.open(p, constants.O_RDONLY | constants.O_NOFOLLOW | NEVER_WAIT));
        return { mode: 'read', rel, fd, size: node.stat.size };
      }
      await this.reads().record(rel, node.entry.oid);
      return contentHandle(rel, await this.overlay.layer.content(node.entry));
    }
    await this.overlay.check('open-write', rel);
    const truncating = (flags & constants.O_TRUNC) !== 0;
    const refusal = checkOpenForWrite(this.overlay.rules, rel, (flags & constants.O_APPEND) !== 0, truncating);
    if (refusal) throw fsError(refusal, `${rel} is append-only: open it with O_APPEND`);
    let size = node.stat ? node.stat.size : 0;
    if (node.entry) {
      if (!truncating) await this.reads().record(rel, node.entry.oid);
      if (truncating) await this.copy.createEmpty(rel);
      else size = await this.copy.file(rel, node.entry);
    }
    const fd = await this.overlay.tree.at(rel, (p) => fsx.open(p, (flags & OPEN_FLAGS) | constants.O_NOFOLLOW | NEVER_WAIT));
    // A second writer: the first one's writes come through here again (O_APPEND lands where usage counts), settled
    // before a truncate counts the file as empty, with no await before `writer` registers this one.
    this.grants.revokeAt(rel);
    if (truncating) {
      this.state.usage.set(rel, 0);
      size = 0;
    }
    return this.writer(rel, fd, size, truncating, (flags & constants.O_APPEND) !== 0);
  }

  async create(rel: string, mode: number, caller?: Caller | null): Promise<Handle> {
    await this.overlay.check('create', rel);
    // Made new in its parent held open, and given to the caller through its descriptor. A name made meanwhile
    // (the kernel sends CREATE for a name it found free) is opened as open(2) would: truncated, its owner kept.
    const fd = await this.copy.withParent(rel, () => this.overlay.tree.inDir(parentOf(rel), async (dir) => {
      const name = `${dir}/${rel.slice(rel.lastIndexOf('/') + 1)}`;
      let made: number;
      try {
        made = await fsx.open(name, constants.O_CREAT | constants.O_EXCL | constants.O_RDWR | constants.O_NOFOLLOW | NEVER_WAIT, mode & 0o7777);
      } catch (e) {
        if (!hasCode(e, 'EEXIST')) throw e;
        return fsx.open(name, constants.O_RDWR | constants.O_TRUNC | constants.O_NOFOLLOW | NEVER_WAIT);
      }
      try {
        await ownNewFile(made, dir, caller, mode);
      } catch (e) {
        await fsx.close(made);
        throw e;
      }
      return made;
    }));
    this.grants.revokeAt(rel);
    this.state.usage.set(rel, 0);
    this.state.made.add(rel);
    return this.writer(rel, fd, 0, true, false);
  }

  /** A descriptor open for writing, under the newest lease in force and the rules of its path. */
  private writer(rel: string, fd: number, size: number, dirty: boolean, append: boolean): WriteHandle {
    const h: WriteHandle = {
      mode: 'write', rel, fd, size, dirty, append, floor: size, appendOnly: isAppendOnly(this.overlay.rules, rel), lease: this.newestLease,
    };
    this.state.opened(h);
    return h;
  }

  /** Whether h may write now: what `writing` checks, without throwing. */
  private mayWrite(h: WriteHandle): boolean {
    return !this.state.gone && !this.state.expired && (!h.lease || this.leasesInForce.has(h.lease));
  }

  /**
   * A descriptor that may write now: one opened for writing (else EBADF), under a lease that has not been
   * revoked or expired (else EACCES), in a branch that has not expired (else EROFS) or been discarded (else EIO).
   */
  private writing(h: Handle): WriteHandle {
    this.state.refuseIfGone();
    if (h.mode !== 'write') throw fsError('EBADF');
    this.state.refuseIfExpired();
    if (h.lease && !this.leasesInForce.has(h.lease)) throw fsError('EACCES', `${h.rel} was opened under lease ${h.lease}, which has ended`);
    return h;
  }

  async read(h: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    if (h.mode === 'content') return readContent(h, buf, len, pos);
    return fsx.read(h.fd, buf, len, pos);
  }

  async write(handle: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    const h = this.writing(handle);
    // A write the binding did not take (past its grant's room, below the floor): what it wrote is counted first.
    this.grants.settle(h, true);
    const usage = this.state.usage;
    // On an O_APPEND descriptor every write lands at the file's end, wherever the kernel thought that was.
    const end = (h.append ? usage.sizeOf(h.rel) : pos) + len;
    // Counted before it is written (checkAppend first: a refused write counts nothing).
    const refusal = (h.appendOnly ? checkAppend(this.overlay.rules, h.rel, pos, h.floor) : null) ?? usage.grow(h.rel, end);
    if (refusal) throw fsError(refusal, refusal === 'EDQUOT' ? `write to ${h.rel} ${overQuota(usage)}` : `write to ${h.rel} refused`);
    const n = await this.counting(h.rel, () => fsx.write(h.fd, buf, len, pos), h.fd);
    if (n < len) await this.countAgain(h.rel, h.fd);
    // Append-only means every write appends (as with chattr +a), also in a file made without O_APPEND:
    // what was written, and maybe committed, is not written over.
    if (h.appendOnly) h.floor = Math.max(h.floor, pos + n);
    h.size = usage.sizeOf(h.rel);
    h.dirty = true;
    this.grants.renew(h);
    return n;
  }

  /** The last close of a file: what it wrote joins the next commit. */
  async release(h: Handle): Promise<void> {
    if (h.mode === 'write') {
      this.grants.settle(h, true);
      this.state.closed(h);
      this.queue(h);
    }
    if (h.mode !== 'content') await fsx.close(h.fd);
  }

  /** Returns once the file's content is on disk and every pending change of the branch is a commit. */
  async fsync(h: Handle | null): Promise<void> {
    // A discarded branch commits nothing more: an fsync's success would be a lie.
    this.state.refuseIfGone();
    if (h?.mode === 'write') {
      this.grants.settle(h, false);
      await fsx.fsync(h.fd);
      this.queue(h);
    }
    await this.committer.flushNow();
  }

  /** What every file open for writing wrote so far joins the next commit (a sync: the kernel sends releases late). */
  queueOpen(): void {
    for (const h of this.state.openWriters()) {
      this.grants.settle(h, false);
      this.queue(h);
    }
  }

  /** What a handle wrote is queued for the next commit. */
  private queue(h: WriteHandle): void {
    if (!h.dirty) return;
    h.dirty = false;
    this.committer.markDirty(h.rel);
  }

  async truncate(rel: string, size: number): Promise<void> {
    await this.overlay.check('truncate', rel);
    const node = await this.overlay.need(rel);
    if (isDir(node)) throw fsError('EISDIR');
    if (node.entry) {
      if (size === 0) await this.copy.createEmpty(rel);
      else await this.copy.file(rel, node.entry);
    }
    this.grants.revokeAt(rel);
    const refusal = this.state.usage.resize(rel, size);
    if (refusal) throw fsError(refusal, `truncate of ${rel} to ${size} bytes ${overQuota(this.state.usage)}`);
    await this.counting(rel, () => this.overlay.tree.at(rel, async (p) => {
      const fd = await fsx.open(p, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      try {
        await fsx.ftruncate(fd, size);
      } finally {
        await fsx.close(fd);
      }
    }));
    this.committer.markDirty(rel);
  }

  async ftruncate(handle: Handle, size: number): Promise<void> {
    await this.overlay.check('truncate', handle.rel);
    const h = this.writing(handle);
    this.grants.revokeAt(h.rel);
    const refusal = this.state.usage.resize(h.rel, size);
    if (refusal) throw fsError(refusal, `truncate of ${h.rel} to ${size} bytes ${overQuota(this.state.usage)}`);
    await this.counting(h.rel, () => fsx.ftruncate(h.fd, size), h.fd);
    h.size = size;
    h.dirty = true;
    this.grants.renew(h);
  }

  /** A change counted before it was made: if it fails, rel is counted again as the disk has it. */
  private async counting<T>(rel: string, change: () => Promise<T>, fd?: number): Promise<T> {
    try {
      return await change();
    } catch (e) {
      await this.countAgain(rel, fd).catch(() => undefined);
      throw e;
    }
  }

  /** Count rel as it is on disk now: through its descriptor when there is one (an unlinked file has no name). */
  private async countAgain(rel: string, fd?: number): Promise<void> {
    if (fd === undefined) return this.copy.countAgain(rel);
    this.state.usage.set(rel, Number((await fsx.fstat(fd)).size));
  }

  /** A rename moved what descriptors write to: they follow it, and answer to the new path's rules from their current end. */
  moved(from: string, to: string): void {
    for (const h of this.state.writersAt(from, true)) {
      h.rel = to + h.rel.slice(from.length);
      h.appendOnly = isAppendOnly(this.overlay.rules, h.rel);
      if (h.appendOnly) h.floor = this.state.usage.sizeOf(h.rel);
    }
  }
}
