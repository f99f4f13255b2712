import { constants, fstatSync } from 'node:fs';
import { fsError } from '../util/errors.js';
import { isWritable, type GrantDesk, type Handle, type View } from '../cow/view.js';
import type { Caller } from '../util/owner.js';
import { fstat } from '../cow/fsx.js';
import type { OpenFiles } from './open-files.js';

/**
 * An open file as a successor needs it after a hand-over: the handle number the kernel uses, the path, how, and
 * the file's inode number on disk when it had one (reopened by path, it must be the same file).
 */
export interface OpenHandle {
  fd: number;
  path: string;
  flags: number;
  ino?: number;
}

interface Entry {
  view: View;
  h: Handle;
  flags: number;
  /** Gives the open-file caps their count back. */
  close?: () => void;
}

/**
 * The files open through the mount, by the handle number the kernel uses, and the ones an earlier nasd had open
 * before it handed the kernel connection on (opened again at first use). `openFiles` caps them per user, per view
 * and in all (absent: no cap).
 */
export class HandleTable {
  private readonly handles = new Map<number, Entry>();
  private readonly inherited = new Map<number, OpenHandle>();
  private readonly reviving = new Map<number, Promise<void>>();
  private next = 1;
  /** The binding's write grants (a mount's; absent in process: every write comes to JS). */
  desk?: GrantDesk;

  constructor(private readonly openFiles?: OpenFiles) {}

  get(fd: number): Entry {
    const entry = this.handles.get(fd);
    if (!entry) throw fsError('EBADF');
    return entry;
  }

  has(fd: number): boolean {
    return this.handles.has(fd);
  }

  /** The descriptor on disk an open handle reads from (-1: none, its content is served from git), for the binding to read through. */
  descriptorOf(fd: number): number {
    const entry = this.handles.get(fd);
    return entry && entry.h.mode !== 'content' ? entry.h.fd : -1;
  }

  /** Open a handle counted against the caller's and the view's open-file caps (given back if the open fails). */
  async open(view: View, who: Caller, flags: number, open: () => Promise<Handle>): Promise<number> {
    const uid = who.uid;
    // Root, the Home's owner and the write leases' principals hold the whole cap; other readers a part of it.
    const close = this.openFiles?.take(uid, view.name, uid === 0 || uid === view.owner.uid || (isWritable(view) && view.mayWrite(uid)));
    try {
      const h = await open();
      const fh = this.register({ view, h, flags, close });
      if (this.desk && isWritable(view)) view.offerWrites(h, fh, this.desk, uid);
      return fh;
    } catch (err) {
      close?.();
      throw err;
    }
  }

  /** The handle closed: its file released, its count given back. */
  async close(fd: number): Promise<void> {
    if (this.inherited.delete(fd)) return;
    const { view, h, close } = this.get(fd);
    this.handles.delete(fd);
    try {
      await view.release(h);
    } finally {
      close?.();
    }
  }

  private register(entry: Entry): number {
    while (this.handles.has(this.next) || this.inherited.has(this.next) || this.next === 0) this.next = (this.next + 1) % 0x7fffffff;
    const fd = this.next++;
    this.handles.set(fd, entry);
    return fd;
  }

  /**
   * A handle the kernel knows from before a hand-over: its file opened again, as it was (not truncated again),
   * its writes granted to the binding as `who`'s (the first to use it). `route` finds the view of its path for `who`.
   */
  revive(fd: number, who: Caller, route: (path: string) => { view: View; rel: string }): Promise<void> {
    const was = this.inherited.get(fd);
    if (!was || this.handles.has(fd)) return Promise.resolve();
    let pending = this.reviving.get(fd);
    if (!pending) {
      pending = (async () => {
        const r = route(was.path);
        const h = await r.view.open(r.rel, was.flags & ~(constants.O_TRUNC | constants.O_CREAT | constants.O_EXCL));
        // Renamed or replaced while no nasd served: another file is at that path now.
        if (was.ino !== undefined && h.mode !== 'content' && Number((await fstat(h.fd)).ino) !== was.ino) {
          await r.view.release(h);
          throw fsError('ESTALE', `${was.path} is another file since the restart`);
        }
        this.handles.set(fd, { view: r.view, h, flags: was.flags, close: this.openFiles?.take(0, r.view.name) });
        this.inherited.delete(fd);
        if (this.desk && isWritable(r.view)) r.view.offerWrites(h, fd, this.desk, who.uid);
      })().finally(() => this.reviving.delete(fd));
      this.reviving.set(fd, pending);
    }
    return pending;
  }

  /** The files open now (a stop that hands the kernel connection on): the successor opens them again lazily. */
  openHandles(): OpenHandle[] {
    return [
      ...[...this.handles].map(([fd, e]) => ({
        fd,
        path: `/${e.view.name}/${e.h.rel}`,
        flags: e.flags,
        // A file of the upper directory, not the mount: a synchronous fstat is safe here.
        ...(e.h.mode === 'content' ? {} : { ino: Number(fstatSync(e.h.fd).ino) }),
      })),
      ...this.inherited.values(),
    ];
  }

  /** Handles an earlier nasd had open: answered as the same handle numbers, each file opened again at first use. */
  inherit(list: OpenHandle[]): void {
    for (const o of list) this.inherited.set(o.fd, o);
  }
}
