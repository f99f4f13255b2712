import { fstatSync } from 'node:fs';
import type { GrantDesk, WriteHandle } from '../view.js';
import type { BranchUsage } from './usage.js';

/** The most room one grant holds: a file growing past it comes back to JS once per this many bytes, and is granted again. */
const MOST_ROOM = 64 * 1024 * 1024;
/** Below this much room a branch near its quota writes through JS, which counts every write exactly. */
const LEAST_ROOM = 1024 * 1024;

/**
 * Write grants: a file open for writing whose writes the binding answers alone (a pwrite on libfuse's worker,
 * no round trip to this thread), within terms that keep every rule a write through JS keeps:
 * - the quota: the grant may grow the file by the room it holds, counted against the branch's limit and the
 *   Home's pool while it is live (held, not spent: a change that would be refused first takes it back);
 * - an append-only file's floor: the binding sends a write below it here, to be refused as always;
 * - the lease and the branch: a grant is made only while the handle may write (`mayWrite`), and ends first when
 *   a lease ends or the branch expires, is discarded or closes;
 * - one writer: a file open for writing twice, or with a second name (a hard link), is written through JS;
 * - Nas-Writers: only the account that opened the file writes under its grant (another one's write comes here).
 * What the binding wrote reaches the handle when the grant is settled: at fsync, sync and release (the file is
 * then queued for a commit, as after a write through JS), and before anything else touches the file or its name.
 * Everything here is synchronous: no other change can come between a settle and what follows it.
 */
export class WriteGrants {
  private stopped = false;

  constructor(
    private readonly usage: BranchUsage,
    /** The handles open for writing at rel, or below it when `below`. */
    private readonly writersAt: (rel: string, below?: boolean) => WriteHandle[],
    /** Every handle open for writing in the branch. */
    private readonly writers: () => WriteHandle[],
    /** Whether h may write now (the branch not gone or expired, its lease in force). */
    private readonly mayWrite: (h: WriteHandle) => boolean,
    /** A writer is named in the next commit (Nas-Writers). */
    private readonly changedBy: (uid: number) => void,
  ) {
    usage.reclaimWith(() => this.revokeAll());
  }

  /** h, open for writing by `uid` as handle `fh`: granted now if it may be. */
  offer(h: WriteHandle, fh: number, desk: GrantDesk, uid: number): void {
    h.grant = { fh, desk, uid, live: false, limit: 0, reserved: 0 };
    this.renew(h);
  }

  /** A grant again for h after JS answered one of its writes: if it may write, alone, and there is room. */
  renew(h: WriteHandle): void {
    const link = h.grant;
    if (!link || link.live || this.stopped || !this.mayWrite(h) || this.writersAt(h.rel).length !== 1) return;
    const room = Math.min(MOST_ROOM, Math.floor(this.usage.room / 2));
    // A file with a second name: what is counted at this name is not all of it (nasd's own disk: fstat is safe).
    if (room < LEAST_ROOM || fstatSync(h.fd).nlink > 1) return;
    const size = this.usage.sizeOf(h.rel);
    const terms = { size, limit: size + room, floor: h.floor, uid: link.uid, append: h.append, appendOnly: h.appendOnly };
    if (!link.desk.grant(link.fh, h.fd, terms)) return;
    this.usage.hold(room);
    Object.assign(link, { live: true, limit: terms.limit, reserved: room });
  }

  /** What the binding wrote through h, counted and marked on h; `revoke`: its writes come here from now on. */
  settle(h: WriteHandle, revoke: boolean): void {
    const link = h.grant;
    if (!link?.live) return;
    const done = link.desk.settle(link.fh, revoke);
    this.usage.unhold(link.reserved);
    link.reserved = 0;
    link.live = !revoke && done !== null;
    if (done?.wrote) {
      // Counted as the writes through JS would have been; a failed or short one: as the disk has the file.
      const size = done.failed ? Number(fstatSync(h.fd).size) : Math.max(this.usage.sizeOf(h.rel), done.size);
      this.usage.set(h.rel, size);
      if (h.appendOnly) h.floor = Math.max(h.floor, done.floor);
      h.size = size;
      h.dirty = true;
      this.changedBy(link.uid);
    }
    if (link.live) {
      link.reserved = Math.max(0, link.limit - this.usage.sizeOf(h.rel));
      this.usage.hold(link.reserved);
    }
  }

  /** Every grant on rel (and below it when `below`) ends: a second writer, a truncate, an unlink or rename. */
  revokeAt(rel: string, below = false): void {
    for (const h of this.writersAt(rel, below)) this.settle(h, true);
  }

  /** Every grant of the branch whose handle `keep` does not keep ends (a lease ended, room is short). */
  revokeAll(keep: (h: WriteHandle) => boolean = () => false): void {
    for (const h of this.writers()) if (!keep(h)) this.settle(h, true);
  }

  /** The branch closes: every grant ends, and none is made again. */
  stop(): void {
    this.stopped = true;
    this.revokeAll();
  }
}
