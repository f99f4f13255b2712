import type { GrantDesk, WriteHandle } from '../view.js';
import type { BranchUsage } from './usage.js';

/** The most room one grant holds: a file growing past it comes back to JS once per this many bytes, and is granted again. */
const MOST_ROOM = 64 * 1024 * 1024;
/** Below this much room a branch near its quota writes through JS, which counts every write exactly. */
const LEAST_ROOM = 1024 * 1024;

/**
 * Write grants: a file open for writing whose writes the binding answers alone (a pwrite on libfuse's worker,
 * no round trip to this thread), within terms that keep every rule a write through JS keeps:
 * - the quota: the grant may grow the file by the room it holds, counted in the branch's usage while it is live
 *   (held, not spent: a change that would be refused first takes the room back, usage.ts reclaim);
 * - an append-only file's floor: the binding sends a write below it here, to be refused as always;
 * - the lease and the branch: when a lease ends or the branch expires, is discarded or closes, the grant ends first;
 * - one writer: a file open for writing twice is written through JS (O_APPEND lands at the end usage counts).
 * What the binding wrote reaches the handle when the grant is settled: at fsync, sync and release (the file is
 * then queued for a commit, as after a write through JS), and before anything else touches the file.
 */
export class WriteGrants {
  constructor(
    private readonly usage: BranchUsage,
    /** The handles open for writing at rel. */
    private readonly writersAt: (rel: string) => WriteHandle[],
    /** Every handle open for writing in the branch. */
    private readonly writers: () => WriteHandle[],
    /** A writer is named in the next commit (Nas-Writers). */
    private readonly changedBy: (uid: number) => void,
  ) {
    usage.reclaim = () => this.revokeAll();
  }

  /** h, open for writing by `uid` as handle `fh`: granted now if it may be. */
  offer(h: WriteHandle, fh: number, desk: GrantDesk, uid: number): void {
    h.grant = { fh, desk, uid, live: false, limit: 0, reserved: 0 };
    this.renew(h);
  }

  /** A grant again for h after JS answered one of its writes (or its file changed): if it is alone and there is room. */
  renew(h: WriteHandle): void {
    const link = h.grant;
    if (!link || link.live || this.writersAt(h.rel).length !== 1) return;
    const room = Math.min(MOST_ROOM, Math.floor(this.usage.room / 2));
    if (room < LEAST_ROOM) return;
    const size = this.usage.sizeOf(h.rel);
    const terms = { size, limit: size + room, floor: h.floor, append: h.append, appendOnly: h.appendOnly };
    if (!link.desk.grant(link.fh, h.fd, terms)) return;
    this.usage.hold(room);
    Object.assign(link, { live: true, limit: terms.limit, reserved: room });
  }

  /**
   * What the binding wrote through h, counted and marked on h; `revoke`: its writes come here from now on.
   * Returns whether a write failed or was short (the caller counts the file again from its descriptor).
   */
  settle(h: WriteHandle, revoke: boolean): boolean {
    const link = h.grant;
    if (!link?.live) return false;
    const done = link.desk.settle(link.fh, revoke);
    this.usage.unhold(link.reserved);
    link.reserved = 0;
    link.live = !revoke && done !== null;
    if (!done) return false;
    // The file's end as written is counted as a write through JS would have counted it; the rest stays held.
    if (done.size > this.usage.sizeOf(h.rel)) this.usage.set(h.rel, done.size);
    if (h.appendOnly) h.floor = Math.max(h.floor, done.floor);
    h.size = this.usage.sizeOf(h.rel);
    if (link.live) {
      link.reserved = Math.max(0, link.limit - h.size);
      this.usage.hold(link.reserved);
    }
    if (done.wrote) {
      h.dirty = true;
      this.changedBy(link.uid);
    }
    return done.failed;
  }

  /** Every grant on rel ends (a second writer, a truncate): true when one of them had a failed write. */
  revokeAt(rel: string): WriteHandle[] {
    return this.writersAt(rel).filter((h) => this.settle(h, true));
  }

  /** Every grant of the branch ends (a lease ended, the branch expires, is discarded or closes, room is short). */
  revokeAll(keep: (h: WriteHandle) => boolean = () => false): WriteHandle[] {
    return this.writers().filter((h) => !keep(h) && this.settle(h, true));
  }
}
