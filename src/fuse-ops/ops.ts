import { constants, fstatSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import type { Logger } from 'pino';
import { FsError, fsError, isDiskFull, toErrno } from '../util/errors.js';
import { isWritable, type FsStats, type Handle, type TimeArg, type View, type WritableView } from '../cow/view.js';
import type { Caller } from '../util/owner.js';
import { mainRefusal } from '../cow/main-view.js';
import type { Mutation } from '../policy/policy.js';
import { attrFromStats, type Attr } from '../cow/attr.js';
import { fstat } from '../cow/fsx.js';
import { ACL_ACCESS } from '../cow/owner-share.js';
import type { OpenFiles } from './open-files.js';
import type { Refusals } from '../homes/refusals.js';
import { meter } from '../metrics/meter.js';

/** What the adapter needs from the daemon: the names under the mount root, the view each stands for, space. */
export interface Router {
  rootNames(): string[];
  view(name: string): View | undefined;
  /** Make a name that is not listed a view when it stands for one (a commit by id); called before a lookup. */
  resolve?(name: string): Promise<void>;
  /** Space for df: the view's (a branch's quota), or the mount's when there is no view. */
  statfs(view?: View): Promise<FsStats>;
  /** Refuse (EACCES) a run's process that reaches any view but its own branch and its Home's main. */
  admit?(view: View, caller: Caller): void;
  /** Where a read on main by this caller is recorded: its run's read manifest, or nowhere. */
  readerOf?(view: View, caller: Caller): { record(path: string, oid: string): Promise<void> } | undefined;
}

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

/** An answer's errno by name, as the caller sees it (EROFS, not the message): the metrics' label. */
const ERRNO_NAMES = new Map<number, string>();
for (const [name, n] of Object.entries(osConstants.errno)) if (!ERRNO_NAMES.has(-n)) ERRNO_NAMES.set(-n, name);
const errnoName = (errno: number): string => ERRNO_NAMES.get(errno) ?? `E${-errno}`;
/** An error's code (EROFS, ENOENT...), when it has one. */
const codeOf = (err: unknown): string | undefined => (err instanceof Error && 'code' in err && typeof err.code === 'string' ? err.code : undefined);

/** An open that may change the file: for writing, or truncating. */
const opensForWriting = (flags: number) => (flags & 3) !== constants.O_RDONLY || (flags & constants.O_TRUNC) !== 0;

/** Codes a caller provokes in normal use: not worth more than a debug line (OpenFiles logs its own caps once). */
const QUIET = new Set(['ENOENT', 'ENODATA', 'EEXIST', 'ENOTEMPTY', 'ENOTDIR', 'EISDIR', 'EINVAL', 'EMFILE', 'ENFILE']);

/** Codes that are a rule saying no (policy, main, leases, quota, limits): kept with their reason for `nas why`. */
const REFUSING = new Set(['EROFS', 'EPERM', 'EACCES', 'EDQUOT', 'EXDEV', 'EMFILE', 'ENFILE', 'ENOSPC', 'EBUSY', 'ENOTSUP']);

/** A refusal as the kernel gets it: a negative errno (the reason was logged and kept where it is met). */
export class Errno extends Error {
  constructor(readonly errno: number) {
    super(`errno ${errno}`);
  }
}

/**
 * The operations on paths the FUSE adapter (adapter.ts) composes its answers of: route each path to a view, call
 * it as `who` (the caller of the request, passed along, never kept aside), and turn every error into an Errno in
 * one place (fail), counted, logged and kept with its reason for `nas why`; anything unexpected becomes EIO and a
 * log line, never a hung caller. `openFiles` caps the files held open per user, per view and in all (absent: no
 * cap). There is no flush: the kernel then stops sending FLUSH on every close; written files join a commit at release.
 */
export function fuseOps(router: Router, log: Logger, openFiles?: OpenFiles, refusals?: Refusals) {
  const handles = new Map<number, { view: View; h: Handle; flags: number; close?: () => void }>();
  /** Handles an earlier nasd opened before it handed the kernel connection on: opened again at first use. */
  const inherited = new Map<number, OpenHandle>();
  const reviving = new Map<number, Promise<void>>();
  let nextHandle = 1;
  const started = new Date();

  function route(path: string, who: Caller): { view: View; rel: string } | null {
    if (path === '/') return null;
    const slash = path.indexOf('/', 1);
    const name = slash < 0 ? path.slice(1) : path.slice(1, slash);
    const view = router.view(name);
    if (!view) throw fsError('ENOENT');
    router.admit?.(view, who);
    return { view, rel: slash < 0 ? '' : path.slice(slash + 1) };
  }

  /** The Home a path is in, for the error counter: only a served view's (a hostile name never becomes a series). */
  function homeOf(path: string): string {
    const slash = path.indexOf('/', 1);
    const view = path === '/' ? undefined : router.view(slash < 0 ? path.slice(1) : path.slice(1, slash));
    return view ? view.name.split(/[@:]/)[0] : '';
  }

  /** A path a mutation may name: inside a view. The mount root itself only lists Homes and branches. */
  function need(path: string, who: Caller): { view: View; rel: string } {
    const topLevel = path.indexOf('/', 1) < 0;
    if (path === '/' || (topLevel && !router.view(path.slice(1)))) {
      throw fsError('EROFS', 'the mount root lists Homes and branches; use nas home create and nas branch create');
    }
    return route(path, who)!;
  }

  /** A path a change names: only a writable view takes it (policy gives the errno for the others), from whoever may write there. */
  function mutable(path: string, op: Mutation, who: Caller): { view: WritableView; rel: string } {
    const { view, rel } = need(path, who);
    if (!isWritable(view)) throw mainRefusal(view, op, rel);
    mayWrite(view, who);
    return { view, rel };
  }

  /** Only root, the Home's owner and the principals of its write leases in force change a branch (EACCES). */
  function mayWrite(view: WritableView, caller: Caller): void {
    if (!view.mayWrite(caller.uid)) throw fsError('EACCES', `uid ${caller.uid} holds no write lease on ${view.name}`);
  }

  /** A change by `who`: the view hears who made it once it succeeded, so a refused call names nobody in a commit. */
  async function by<T>(who: Caller, view: WritableView, change: Promise<T>): Promise<T> {
    const value = await change;
    view.changedBy(who.uid);
    return value;
  }

  function handle(fd: number): { view: View; h: Handle; close?: () => void } {
    const entry = handles.get(fd);
    if (!entry) throw fsError('EBADF');
    return entry;
  }

  /** Both ends of a rename or link: one view (else EXDEV, as between two filesystems), and a writable one. */
  function pair(from: string, to: string, op: Mutation, who: Caller): { view: WritableView; a: string; b: string } {
    const a = need(from, who);
    const b = need(to, who);
    if (a.view !== b.view) throw fsError('EXDEV', 'a rename or hard link across views');
    if (!isWritable(a.view)) throw mainRefusal(a.view, op, a.rel);
    mayWrite(a.view, who);
    return { view: a.view, a: a.rel, b: b.rel };
  }

  /** A handle a change goes through: its descriptor was checked when it was opened (writes while its lease lasts). */
  function writableHandle(fd: number, op: Mutation): { view: WritableView; h: Handle } {
    const { view, h } = handle(fd);
    if (!isWritable(view)) throw mainRefusal(view, op, h.rel);
    return { view, h };
  }

  function register(view: View, h: Handle, flags: number, close?: () => void): number {
    while (handles.has(nextHandle) || inherited.has(nextHandle) || nextHandle === 0) nextHandle = (nextHandle + 1) % 0x7fffffff;
    const fd = nextHandle++;
    handles.set(fd, { view, h, flags, close });
    return fd;
  }

  /** A handle the kernel knows from before a hand-over: its file opened again, as it was (not truncated again). */
  function revive(fd: number, who: Caller): Promise<void> {
    const was = inherited.get(fd);
    if (!was || handles.has(fd)) return Promise.resolve();
    let pending = reviving.get(fd);
    if (!pending) {
      pending = (async () => {
        const r = need(was.path, who);
        const h = await r.view.open(r.rel, was.flags & ~(constants.O_TRUNC | constants.O_CREAT | constants.O_EXCL));
        // Renamed or replaced while no nasd served: another file is at that path now.
        if (was.ino !== undefined && h.mode !== 'content' && Number((await fstat(h.fd)).ino) !== was.ino) {
          await r.view.release(h);
          throw fsError('ESTALE', `${was.path} is another file since the restart`);
        }
        handles.set(fd, { view: r.view, h, flags: was.flags, close: openFiles?.take(0, r.view.name) });
        inherited.delete(fd);
      })().finally(() => reviving.delete(fd));
      reviving.set(fd, pending);
    }
    return pending;
  }

  /** Open a handle counted against the caller's and the view's open-file caps (given back if the open fails). */
  async function counted(view: View, who: Caller, flags: number, open: () => Promise<Handle>): Promise<number> {
    const uid = who.uid;
    // Root, the Home's owner and the write leases' principals hold the whole cap; other readers a part of it.
    const close = openFiles?.take(uid, view.name, uid === 0 || uid === view.owner.uid || (isWritable(view) && view.mayWrite(uid)));
    try {
      return register(view, await open(), flags, close);
    } catch (err) {
      close?.();
      throw err;
    }
  }

  /** The errno a failed op answers with, counted, logged and (a rule saying no) kept with its reason. `other`: a rename's or link's other name. */
  function fail(op: string, path: string, err: unknown, who: Caller, other?: string): number {
    const errno = toErrno(err);
    const code = codeOf(err) ?? (isDiskFull(err) ? 'ENOSPC' : 'EIO');
    meter.fuseError(homeOf(path), op, errnoName(errno));
    if (refusals && err instanceof FsError && REFUSING.has(code)) {
      refusals.note({ path, other, op, code, why: err.message === code ? `refused (${code})` : err.message, uid: who.uid, pid: who.pid });
    }
    if (code === 'ENOSPC') log.warn({ op, path, code }, 'the disk that holds the state directory is full: free space there (deletes keep their content in the recycle area, so they need some too)');
    else if (err instanceof FsError && !QUIET.has(code)) log.info({ op, path, code, why: err.message }, 'refused');
    else if (!(err instanceof FsError) && errno === -osConstants.errno.EIO) log.error({ op, path, err }, 'operation failed');
    else log.debug({ op, path, code }, 'failed');
    return errno;
  }

  /** Run an op, timed; a failure becomes an Errno (fail). `other`: a rename's or link's other name. */
  async function op<T>(name: string, path: string, who: Caller, fn: () => Promise<T>, other?: string): Promise<T> {
    const started = meter.start();
    try {
      return await fn();
    } catch (err) {
      throw new Errno(fail(name, path, err, who, other));
    } finally {
      meter.fuse(name, started);
    }
  }

  /** The access ACL of a path's node, or null (the mount root and main have none). */
  async function aclAt(path: string, who: Caller): Promise<Buffer | null> {
    const r = route(path, who);
    return (r && (await r.view.acl?.(r.rel))) ?? null;
  }

  const rootAttr = (): Attr => ({
    mode: constants.S_IFDIR | 0o755, size: 4096, uid: 0, gid: 0, nlink: 1,
    mtime: started, atime: started, ctime: started, blocks: 0, blksize: 4096,
  });

  return {
    /** The files open now (a stop that hands the kernel connection on): the successor opens them again lazily. */
    openHandles: (): OpenHandle[] => [
      ...[...handles].map(([fd, e]) => ({
        fd,
        path: `/${e.view.name}/${e.h.rel}`,
        flags: e.flags,
        // A file of the upper directory, not the mount: a synchronous fstat is safe here.
        ...(e.h.mode === 'content' ? {} : { ino: Number(fstatSync(e.h.fd).ino) }),
      })),
      ...inherited.values(),
    ],
    /** Handles an earlier nasd had open: answered as the same handle numbers, each file opened again at first use. */
    inheritHandles: (list: OpenHandle[]) => list.forEach((o) => inherited.set(o.fd, o)),
    /** The descriptor on disk an open handle reads from (-1: none, its content is served from git), for the binding to read through. */
    descriptorOf: (fd: number): number => {
      const entry = handles.get(fd);
      return entry && entry.h.mode !== 'content' ? entry.h.fd : -1;
    },
    getattr: (path: string, who: Caller) =>
      op('getattr', path, who, async (): Promise<Attr> => {
        // The kernel looks a name up (getattr) before anything else uses it: the one place a view is made on demand (`<role>:<commit>`).
        if (router.resolve && path.indexOf('/', 1) < 0 && path.includes(':')) await router.resolve(path.slice(1));
        const r = route(path, who);
        return r ? r.view.getattr(r.rel) : rootAttr();
      }),
    /** Attributes through an open descriptor: a file unlinked while open has no path left. */
    fgetattr: (fd: number, who: Caller) =>
      op('getattr', '', who, async (): Promise<Attr> => {
        await revive(fd, who);
        const { h } = handle(fd);
        if (h.mode === 'content') throw fsError('ENOENT');
        return attrFromStats(await fstat(h.fd));
      }),
    /** The names only: the binding puts . and .. first, as on a disk. */
    readdir: (path: string, who: Caller) =>
      op('readdir', path, who, async (): Promise<string[]> => {
        const r = route(path, who);
        return r ? r.view.readdir(r.rel) : router.rootNames();
      }),
    readlink: (path: string, who: Caller) => op('readlink', path, who, async () => { const r = need(path, who); return r.view.readlink(r.rel); }),
    open: (path: string, flags: number, who: Caller) =>
      op('open', path, who, async () => {
        const r = need(path, who);
        if (isWritable(r.view) && opensForWriting(flags)) mayWrite(r.view, who);
        // A run's read of main is recorded before the open is answered.
        const reader = r.view.kind === 'main' ? router.readerOf?.(r.view, who) : undefined;
        return counted(r.view, who, flags, async () => {
          const h = await r.view.open(r.rel, flags);
          if (reader && h.oid) await reader.record(r.rel, h.oid);
          return h;
        });
      }),
    create: (path: string, mode: number, who: Caller) =>
      op('create', path, who, async () => {
        const r = mutable(path, 'create', who);
        return by(who, r.view, counted(r.view, who, constants.O_RDWR, () => r.view.create(r.rel, mode, who)));
      }),
    read: (path: string, fd: number, buf: Buffer, pos: number, who: Caller) =>
      op('read', path, who, async () => { await revive(fd, who); const { view, h } = handle(fd); return view.read(h, buf, buf.length, pos); }),
    write: (path: string, fd: number, buf: Buffer, pos: number, who: Caller) =>
      op('write', path, who, async () => {
        await revive(fd, who);
        const { view, h } = writableHandle(fd, 'write');
        return by(who, view, view.write(h, buf, buf.length, pos));
      }),
    release: (path: string, fd: number, who: Caller) =>
      op('release', path, who, async () => {
        if (inherited.delete(fd)) return;
        const { view, h, close } = handle(fd);
        handles.delete(fd);
        try {
          await view.release(h);
        } finally {
          close?.();
        }
      }),
    fsync: (path: string, fd: number, who: Caller) =>
      op('fsync', path, who, async () => {
        await revive(fd, who);
        const entry = handles.get(fd);
        if (entry) return entry.view.fsync(entry.h);
        const r = route(path, who);
        if (r) await r.view.fsync(null);
      }),
    fsyncdir: (path: string, who: Caller) =>
      op('fsyncdir', path, who, async () => {
        const r = route(path, who);
        if (r) await r.view.fsync(null);
      }),
    truncate: (path: string, size: number, who: Caller) =>
      op('truncate', path, who, async () => { const r = mutable(path, 'truncate', who); await by(who, r.view, r.view.truncate(r.rel, size)); }),
    ftruncate: (path: string, fd: number, size: number, who: Caller) =>
      op('ftruncate', path, who, async () => {
        await revive(fd, who);
        const { view, h } = writableHandle(fd, 'truncate');
        await by(who, view, view.ftruncate(h, size));
      }),
    unlink: (path: string, who: Caller) =>
      op('unlink', path, who, async () => { const r = mutable(path, 'unlink', who); await by(who, r.view, r.view.unlink(r.rel)); }),
    mkdir: (path: string, mode: number, who: Caller) =>
      op('mkdir', path, who, async () => { const r = mutable(path, 'mkdir', who); await by(who, r.view, r.view.mkdir(r.rel, mode, who)); }),
    rmdir: (path: string, who: Caller) =>
      op('rmdir', path, who, async () => { const r = mutable(path, 'rmdir', who); await by(who, r.view, r.view.rmdir(r.rel)); }),
    rename: (from: string, to: string, who: Caller) =>
      op('rename', from, who, async () => { const p = pair(from, to, 'rename-from', who); await by(who, p.view, p.view.rename(p.a, p.b)); }, to),
    symlink: (target: string, path: string, who: Caller) =>
      op('symlink', path, who, async () => { const r = mutable(path, 'symlink', who); await by(who, r.view, r.view.symlink(target, r.rel, who)); }),
    link: (from: string, to: string, who: Caller) =>
      op('link', to, who, async () => { const p = pair(from, to, 'link', who); await by(who, p.view, p.view.link(p.a, p.b)); }, from),
    mknod: (path: string, mode: number, dev: number, who: Caller) =>
      op('mknod', path, who, async () => { const r = mutable(path, 'mknod', who); await by(who, r.view, r.view.mknod(r.rel, mode, dev, who)); }),
    chmod: (path: string, mode: number, who: Caller) =>
      op('chmod', path, who, async () => { const r = mutable(path, 'chmod', who); await by(who, r.view, r.view.chmod(r.rel, mode)); }),
    chown: (path: string, uid: number, gid: number, who: Caller) =>
      op('chown', path, who, async () => { const r = mutable(path, 'chmod', who); await by(who, r.view, r.view.chown(r.rel, uid, gid)); }),
    utimens: (path: string, atime: TimeArg, mtime: TimeArg, who: Caller) =>
      op('utimens', path, who, async () => { const r = mutable(path, 'utimens', who); await by(who, r.view, r.view.utimens(r.rel, atime, mtime)); }),
    statfs: (path: string, who: Caller) => op('statfs', path, who, async () => router.statfs(route(path, who)?.view)),
    /** The one extended attribute a view has: a node's access ACL (the binding answers every other name itself). */
    getacl: (path: string, who: Caller) =>
      op('getxattr', path, who, async () => {
        const acl = await aclAt(path, who);
        if (!acl) throw fsError('ENODATA');
        return acl;
      }),
    /** The names of a node's extended attributes, each ended by a NUL: its ACL's, when it has one. */
    listxattr: (path: string, who: Caller) =>
      op('listxattr', path, who, async () => Buffer.from((await aclAt(path, who)) ? `${ACL_ACCESS}\0` : '')),
  };
}

export type Ops = ReturnType<typeof fuseOps>;
