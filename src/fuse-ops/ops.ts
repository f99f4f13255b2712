import { constants, fstatSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import type { Logger } from 'pino';
import { FsError, fsError, isDiskFull, toErrno } from '../util/errors.js';
import { isWritable, type FsStats, type Handle, type TimeArg, type View, type WritableView } from '../cow/view.js';
import type { Caller } from '../util/owner.js';
import { mainRefusal } from '../cow/main-view.js';
import type { Mutation } from '../policy/policy.js';
import { attrFromStats } from '../cow/attr.js';
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
  admit?(view: View, caller: () => Caller | null): void;
  /** Where a read on main by this caller is recorded: its run's read manifest, or nowhere. */
  readerOf?(view: View, caller: Caller | null): { record(path: string, oid: string): Promise<void> } | undefined;
}

type Cb = (err: number, ...rest: unknown[]) => void;

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

/** An open that may change the file: for writing, or truncating. */
const opensForWriting = (flags: number) => (flags & 3) !== constants.O_RDONLY || (flags & constants.O_TRUNC) !== 0;

/** Codes a caller provokes in normal use: not worth more than a debug line (OpenFiles logs its own caps once). */
const QUIET = new Set(['ENOENT', 'ENODATA', 'EEXIST', 'ENOTEMPTY', 'ENOTDIR', 'EISDIR', 'EINVAL', 'EMFILE', 'ENFILE']);

/** Metadata requests: the hottest path, where nothing but the answer is worth a call. */
const LOOKUPS = new Set(['getattr', 'readdir', 'readlink', 'access', 'statfs', 'getxattr', 'listxattr']);

/** Codes that are a rule saying no (policy, main, leases, quota, limits): kept with their reason for `nas why`. */
const REFUSING = new Set(['EROFS', 'EPERM', 'EACCES', 'EDQUOT', 'EXDEV', 'EMFILE', 'ENFILE', 'ENOSPC', 'EBUSY', 'ENOTSUP']);

/**
 * The thin FUSE adapter: route each path to a view, call it, answer exactly once. Errors become errnos
 * in one place (toErrno); anything unexpected becomes EIO and a log line, never a hung caller.
 * There is no flush handler on purpose: the kernel then stops sending FLUSH on every close (one request
 * less per file); written files join a commit at release.
 * `callerOf` says who made the request being handled; it is valid only synchronously at the start of a
 * handler, so handlers that need it take it as a default parameter of the function `answer` calls at once.
 * `openFiles` caps the files held open per user, per view and in all (absent: no cap). `refusals` keeps each
 * refusal with its reason and who met it (`nas why`).
 */
export function fuseOps(router: Router, log: Logger, callerOf: () => Caller | null = () => null, openFiles?: OpenFiles, refusals?: Refusals) {
  const handles = new Map<number, { view: View; h: Handle; flags: number; close?: () => void }>();
  /** Handles an earlier nasd opened before it handed the kernel connection on: opened again at first use. */
  const inherited = new Map<number, OpenHandle>();
  const reviving = new Map<number, Promise<void>>();
  let nextHandle = 1;
  const started = new Date();

  /** `caller`: who asks, when it had to be asked before an await (it is only valid at the handler's start). */
  function route(path: string, caller: () => Caller | null = callerOf): { view: View; rel: string } | null {
    if (path === '/') return null;
    const slash = path.indexOf('/', 1);
    const name = slash < 0 ? path.slice(1) : path.slice(1, slash);
    const view = router.view(name);
    if (!view) throw fsError('ENOENT');
    router.admit?.(view, caller);
    return { view, rel: slash < 0 ? '' : path.slice(slash + 1) };
  }

  /** The Home a path is in, for the error counter: only a served view's (a hostile name never becomes a series). */
  function homeOf(path: string): string {
    const slash = path.indexOf('/', 1);
    const view = path === '/' ? undefined : router.view(slash < 0 ? path.slice(1) : path.slice(1, slash));
    return view ? view.name.split(/[@:]/)[0] : '';
  }

  /** A path a mutation may name: inside a view. The mount root itself only lists Homes and branches. */
  function need(path: string): { view: View; rel: string } {
    const topLevel = path.indexOf('/', 1) < 0;
    if (path === '/' || (topLevel && !router.view(path.slice(1)))) {
      throw fsError('EROFS', 'the mount root lists Homes and branches; use nas home create and nas branch create');
    }
    return route(path)!;
  }

  /** A path a mutation names: only a writable view takes it; policy gives the errno for the others. */
  function mutable(path: string, op: Mutation): { view: WritableView; rel: string } {
    const { view, rel } = need(path);
    if (!isWritable(view)) throw mainRefusal(view, op, rel);
    return { view: changing(view), rel };
  }

  /**
   * Notes who is changing a view. Called synchronously at a handler's start, where the caller is known; the
   * view hears of it once the change succeeded (see settle), so a refused call names nobody in a commit.
   * A change by path (`byPath`) is refused to whoever may not write in the view at all; a descriptor was
   * checked when it was opened, and writes while its lease lasts.
   */
  function changing(view: WritableView, byPath = true): WritableView {
    const caller = callerOf();
    if (caller) {
      if (byPath) mayWrite(view, caller);
      change = { view, uid: caller.uid };
    }
    return view;
  }

  /** Only root, the Home's owner and the principals of its write leases in force change a branch (EACCES). */
  function mayWrite(view: WritableView, caller: Caller): void {
    if (!view.mayWrite(caller.uid)) throw fsError('EACCES', `uid ${caller.uid} holds no write lease on ${view.name}`);
  }

  /** The change the handler being started noted, taken right after its synchronous start. */
  let change: { view: WritableView; uid: number } | null = null;
  function settle<T>(run: Promise<T>): Promise<T> {
    const noted = change;
    change = null;
    return noted ? run.then((v) => (noted.view.changedBy(noted.uid), v)) : run;
  }

  function handle(fd: number): { view: View; h: Handle; close?: () => void } {
    const entry = handles.get(fd);
    if (!entry) throw fsError('EBADF');
    return entry;
  }

  /** Both ends of a rename or link: one view (else EXDEV, as between two filesystems), and a writable one. */
  function pair(from: string, to: string, op: Mutation): { view: WritableView; a: string; b: string } {
    const a = need(from);
    const b = need(to);
    if (a.view !== b.view) throw fsError('EXDEV', 'a rename or hard link across views');
    if (!isWritable(a.view)) throw mainRefusal(a.view, op, a.rel);
    return { view: changing(a.view), a: a.rel, b: b.rel };
  }

  function writableHandle(fd: number, op: Mutation): { view: WritableView; h: Handle } {
    const { view, h } = handle(fd);
    if (!isWritable(view)) throw mainRefusal(view, op, h.rel);
    return { view: changing(view, false), h };
  }

  function register(view: View, h: Handle, flags: number, close?: () => void): number {
    while (handles.has(nextHandle) || inherited.has(nextHandle) || nextHandle === 0) nextHandle = (nextHandle + 1) % 0x7fffffff;
    const fd = nextHandle++;
    handles.set(fd, { view, h, flags, close });
    return fd;
  }

  /** A handle the kernel knows from before a hand-over: its file opened again, as it was (not truncated again). */
  function revive(fd: number): Promise<void> {
    const was = inherited.get(fd);
    if (!was || handles.has(fd)) return Promise.resolve();
    let pending = reviving.get(fd);
    if (!pending) {
      pending = (async () => {
        const r = need(was.path);
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
  async function counted(view: View, caller: Caller | null, flags: number, open: () => Promise<Handle>): Promise<number> {
    const uid = caller?.uid ?? 0;
    // Root, the Home's owner and the write leases' principals hold the whole cap; other readers a part of it.
    const close = openFiles?.take(uid, view.name, uid === 0 || uid === view.owner.uid || (isWritable(view) && view.mayWrite(uid)));
    try {
      return register(view, await open(), flags, close);
    } catch (err) {
      close?.();
      throw err;
    }
  }

  /** `caller`: who made the request, read at its start. `other`: a rename's or link's other name. */
  function fail(op: string, path: string, err: unknown, caller: Caller | null, other?: string): number {
    const errno = toErrno(err);
    const code = (err as { code?: string }).code ?? (isDiskFull(err) ? 'ENOSPC' : 'EIO');
    meter.fuseError(homeOf(path), op, errnoName(errno));
    if (refusals && err instanceof FsError && REFUSING.has(code)) {
      refusals.note({ path, other, op, code, why: err.message === code ? `refused (${code})` : err.message, uid: caller?.uid, pid: caller?.pid });
    }
    if (code === 'ENOSPC') log.warn({ op, path, code }, 'the disk that holds the state directory is full: free space there (deletes keep their content in the recycle area, so they need some too)');
    else if (err instanceof FsError && !QUIET.has(code)) log.info({ op, path, code, why: err.message }, 'refused');
    else if (!(err instanceof FsError) && errno === -osConstants.errno.EIO) log.error({ op, path, err }, 'operation failed');
    else log.debug({ op, path, code }, 'failed');
    return errno;
  }

  /** Run an op and answer the callback once, with a value. `other`: a rename's or link's other name. */
  function answer<T>(op: string, path: string, cb: Cb, fn: () => Promise<T>, other?: string): void {
    // Lookups and listings are the hottest path: who asks is not read for them (their refusals keep no uid).
    const caller = refusals && !LOOKUPS.has(op) ? callerOf() : null;
    const started = meter.start();
    settle(fn()).then(
      (value) => {
        meter.fuse(op, started);
        return value === undefined ? cb(0) : cb(0, value);
      },
      (err) => {
        const errno = fail(op, path, err, caller, other);
        meter.fuse(op, started);
        cb(errno);
      },
    );
  }

  /** read and write answer with a byte count or a negative errno. */
  function answerCount(op: string, path: string, cb: (n: number) => void, fn: () => Promise<number>): void {
    // Reads are refused by nothing kept here: who reads is not asked (the hottest path).
    const caller = refusals && op !== 'read' ? callerOf() : null;
    const started = meter.start();
    settle(fn()).then(
      (n) => {
        meter.fuse(op, started);
        cb(n);
      },
      (err) => {
        const errno = fail(op, path, err, caller);
        meter.fuse(op, started);
        cb(errno);
      },
    );
  }

  /** The access ACL of a path's node, or null (the mount root and main have none). */
  async function aclAt(path: string): Promise<Buffer | null> {
    const r = route(path);
    return (r && (await r.view.acl?.(r.rel))) ?? null;
  }

  const rootAttr = () => ({
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
    getattr: (path: string, cb: Cb) =>
      answer('getattr', path, cb, async () => {
        // The kernel looks a name up (getattr) before anything else uses it: the one place a view is made on demand
        // (`<role>:<commit>`). Who asks is read first: after the await it could be another request's caller.
        let caller = callerOf;
        if (router.resolve && path.indexOf('/', 1) < 0 && path.includes(':')) {
          const asking = callerOf();
          caller = () => asking;
          await router.resolve(path.slice(1));
        }
        const r = route(path, caller);
        return r ? r.view.getattr(r.rel) : rootAttr();
      }),
    /** Attributes through an open descriptor: a file unlinked while open has no path left. */
    fgetattr: (fd: number, cb: Cb) =>
      answer('getattr', '', cb, async () => {
        await revive(fd);
        const { h } = handle(fd);
        if (h.mode === 'content') throw fsError('ENOENT');
        return attrFromStats(await fstat(h.fd));
      }),
    readdir: (path: string, cb: Cb) =>
      answer('readdir', path, cb, async () => {
        // The names only: the binding puts . and .. first, as on a disk.
        const r = route(path);
        return r ? r.view.readdir(r.rel) : router.rootNames();
      }),
    readlink: (path: string, cb: Cb) => answer('readlink', path, cb, async () => { const r = need(path); return r.view.readlink(r.rel); }),
    access: (path: string, mode: number, cb: Cb) =>
      answer('access', path, cb, async () => {
        const r = route(path);
        if (r) await r.view.access(r.rel, mode);
      }),
    open: (path: string, flags: number, cb: Cb) =>
      answer('open', path, cb, async (caller = callerOf()) => {
        const r = need(path);
        if (caller && isWritable(r.view) && opensForWriting(flags)) mayWrite(r.view, caller);
        // Who reads main is asked now, while the request is current; recorded before the open is answered.
        const reader = r.view.kind === 'main' ? router.readerOf?.(r.view, caller) : undefined;
        return counted(r.view, caller, flags, async () => {
          const h = await r.view.open(r.rel, flags);
          if (reader && h.oid) await reader.record(r.rel, h.oid);
          return h;
        });
      }),
    create: (path: string, mode: number, cb: Cb) =>
      answer('create', path, cb, async (caller = callerOf()) => {
        const r = mutable(path, 'create');
        return counted(r.view, caller, constants.O_RDWR, () => r.view.create(r.rel, mode, caller));
      }),
    read: (path: string, fd: number, buf: Buffer, len: number, pos: number, cb: (n: number) => void) =>
      answerCount('read', path, cb, async () => { await revive(fd); const { view, h } = handle(fd); return view.read(h, buf, len, pos); }),
    write: (path: string, fd: number, buf: Buffer, len: number, pos: number, cb: (n: number) => void) =>
      answerCount('write', path, cb, async () => { await revive(fd); const { view, h } = writableHandle(fd, 'write'); return view.write(h, buf, len, pos); }),
    release: (path: string, fd: number, cb: Cb) =>
      answer('release', path, cb, async () => {
        if (inherited.delete(fd)) return;
        const { view, h, close } = handle(fd);
        handles.delete(fd);
        try {
          await view.release(h);
        } finally {
          close?.();
        }
      }),
    fsync: (path: string, _datasync: number, fd: number, cb: Cb) =>
      answer('fsync', path, cb, async () => {
        await revive(fd);
        const entry = handles.get(fd);
        if (entry) return entry.view.fsync(entry.h);
        const r = route(path);
        if (r) await r.view.fsync(null);
      }),
    fsyncdir: (path: string, _datasync: number, _fd: number, cb: Cb) =>
      answer('fsyncdir', path, cb, async () => {
        const r = route(path);
        if (r) await r.view.fsync(null);
      }),
    truncate: (path: string, size: number, cb: Cb) =>
      answer('truncate', path, cb, async () => { const r = mutable(path, 'truncate'); await r.view.truncate(r.rel, size); }),
    ftruncate: (path: string, fd: number, size: number, cb: Cb) =>
      answer('ftruncate', path, cb, async () => { await revive(fd); const { view, h } = writableHandle(fd, 'truncate'); await view.ftruncate(h, size); }),
    unlink: (path: string, cb: Cb) => answer('unlink', path, cb, async () => { const r = mutable(path, 'unlink'); await r.view.unlink(r.rel); }),
    mkdir: (path: string, mode: number, cb: Cb) =>
      answer('mkdir', path, cb, async (caller = callerOf()) => { const r = mutable(path, 'mkdir'); await r.view.mkdir(r.rel, mode, caller); }),
    rmdir: (path: string, cb: Cb) => answer('rmdir', path, cb, async () => { const r = mutable(path, 'rmdir'); await r.view.rmdir(r.rel); }),
    rename: (from: string, to: string, cb: Cb) =>
      answer('rename', from, cb, async () => {
        const p = pair(from, to, 'rename-from');
        await p.view.rename(p.a, p.b);
      }, to),
    symlink: (target: string, path: string, cb: Cb) =>
      answer('symlink', path, cb, async (caller = callerOf()) => { const r = mutable(path, 'symlink'); await r.view.symlink(target, r.rel, caller); }),
    link: (from: string, to: string, cb: Cb) =>
      answer('link', to, cb, async () => {
        const p = pair(from, to, 'link');
        await p.view.link(p.a, p.b);
      }, from),
    mknod: (path: string, mode: number, dev: number, cb: Cb) =>
      answer('mknod', path, cb, async (caller = callerOf()) => { const r = mutable(path, 'mknod'); await r.view.mknod(r.rel, mode, dev, caller); }),
    chmod: (path: string, mode: number, cb: Cb) =>
      answer('chmod', path, cb, async () => { const r = mutable(path, 'chmod'); await r.view.chmod(r.rel, mode); }),
    chown: (path: string, uid: number, gid: number, cb: Cb) =>
      answer('chown', path, cb, async () => { const r = mutable(path, 'chmod'); await r.view.chown(r.rel, uid, gid); }),
    utimens: (path: string, atime: TimeArg, mtime: TimeArg, cb: Cb) =>
      answer('utimens', path, cb, async () => { const r = mutable(path, 'utimens'); await r.view.utimens(r.rel, atime, mtime); }),
    statfs: (path: string, cb: Cb) => answer('statfs', path, cb, async () => router.statfs(route(path)?.view)),
    /** The one extended attribute a view has: a node's access ACL (the binding answers every other name itself). */
    getacl: (path: string, cb: Cb) =>
      answer('getxattr', path, cb, async () => {
        const acl = await aclAt(path);
        if (!acl) throw fsError('ENODATA');
        return acl;
      }),
    /** The names of a node's extended attributes, each ended by a NUL: its ACL's, when it has one. */
    listxattr: (path: string, cb: Cb) =>
      answer('listxattr', path, cb, async () => Buffer.from((await aclAt(path)) ? `${ACL_ACCESS}\0` : '')),
  };
}
