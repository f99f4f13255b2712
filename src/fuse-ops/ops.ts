import { constants } from 'node:fs';
import { constants as osConstants } from 'node:os';
import type { Logger } from 'pino';
import { FsError, fsError, isDiskFull, toErrno } from '../util/errors.js';
import { isWritable, type FsStats, type GrantDesk, type TimeArg, type View, type WritableView } from '../cow/view.js';
import type { Caller } from '../util/owner.js';
import { mainRefusal } from '../cow/main-view.js';
import type { Mutation } from '../policy/policy.js';
import { attrFromStats, type Attr } from '../cow/attr.js';
import { fstat } from '../cow/fsx.js';
import { ACL_ACCESS } from '../cow/owner-share.js';
import type { OpenFiles } from './open-files.js';
import { HandleTable, type OpenHandle } from './handles.js';
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

export type { OpenHandle } from './handles.js';

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
 * log line, never a hung caller. There is no flush: the kernel then stops sending FLUSH on every close; written
 * files join a commit at release.
 */
export class PathOps {
  private readonly files: HandleTable;
  private readonly started = new Date();

  constructor(private readonly router: Router, private readonly log: Logger, openFiles?: OpenFiles, private readonly refusals?: Refusals) {
    this.files = new HandleTable(openFiles);
  }

  /** The files open now, for a successor (a stop that hands the kernel connection on). */
  openHandles(): OpenHandle[] {
    return this.files.openHandles();
  }

  /** Handles an earlier nasd had open: answered as the same handle numbers, each file opened again at first use. */
  inheritHandles(list: OpenHandle[]): void {
    this.files.inherit(list);
  }

  /** Writes of files open for writing may be answered by the binding (a mount's grants: write-grants.ts). */
  useGrants(desk: GrantDesk): void {
    this.files.desk = desk;
  }

  /** The descriptor on disk an open handle reads from (-1: none), for the binding to read through. */
  descriptorOf(fd: number): number {
    return this.files.descriptorOf(fd);
  }

  private route(path: string, who: Caller): { view: View; rel: string } | null {
    if (path === '/') return null;
    const slash = path.indexOf('/', 1);
    const name = slash < 0 ? path.slice(1) : path.slice(1, slash);
    const view = this.router.view(name);
    if (!view) throw fsError('ENOENT');
    this.router.admit?.(view, who);
    return { view, rel: slash < 0 ? '' : path.slice(slash + 1) };
  }

  /** The Home a path is in, for the error counter: only a served view's (a hostile name never becomes a series). */
  private homeOf(path: string): string {
    const slash = path.indexOf('/', 1);
    const view = path === '/' ? undefined : this.router.view(slash < 0 ? path.slice(1) : path.slice(1, slash));
    return view ? view.name.split(/[@:]/)[0] : '';
  }

  /** A path a change may name: inside a view. The mount root itself only lists Homes and branches. */
  private need(path: string, who: Caller): { view: View; rel: string } {
    const topLevel = path.indexOf('/', 1) < 0;
    const r = topLevel && !this.router.view(path.slice(1)) ? null : this.route(path, who);
    if (!r) throw fsError('EROFS', 'the mount root lists Homes and branches; use nas home create and nas branch create');
    return r;
  }

  /** A path a change names: only a writable view takes it (policy gives the errno for the others), from whoever may write there. */
  private mutable(path: string, op: Mutation, who: Caller): { view: WritableView; rel: string } {
    const { view, rel } = this.need(path, who);
    if (!isWritable(view)) throw mainRefusal(view, op, rel);
    mayWrite(view, who);
    return { view, rel };
  }

  /** Both ends of a rename or link: one view (else EXDEV, as between two filesystems), and a writable one. */
  private pair(from: string, to: string, op: Mutation, who: Caller): { view: WritableView; a: string; b: string } {
    const a = this.need(from, who);
    const b = this.need(to, who);
    if (a.view !== b.view) throw fsError('EXDEV', 'a rename or hard link across views');
    if (!isWritable(a.view)) throw mainRefusal(a.view, op, a.rel);
    mayWrite(a.view, who);
    return { view: a.view, a: a.rel, b: b.rel };
  }

  /** An open handle, opened again first if an earlier nasd opened it. */
  private async handle(fd: number, who: Caller) {
    await this.files.revive(fd, who, (path) => this.need(path, who));
    return this.files.get(fd);
  }

  /** A handle a change goes through: its descriptor was checked when it was opened (writes while its lease lasts). */
  private async writableHandle(fd: number, op: Mutation, who: Caller) {
    const { view, h } = await this.handle(fd, who);
    if (!isWritable(view)) throw mainRefusal(view, op, h.rel);
    return { view, h };
  }

  /** The errno a failed op answers with, counted, logged and (a rule saying no) kept with its reason. `other`: a rename's or link's other name. */
  private fail(op: string, path: string, err: unknown, who: Caller, other?: string): number {
    const errno = toErrno(err);
    const code = codeOf(err) ?? (isDiskFull(err) ? 'ENOSPC' : 'EIO');
    meter.fuseError(this.homeOf(path), op, errnoName(errno));
    if (this.refusals && err instanceof FsError && REFUSING.has(code)) {
      this.refusals.note({ path, other, op, code, why: err.message === code ? `refused (${code})` : err.message, uid: who.uid, pid: who.pid });
    }
    const log = this.log;
    if (code === 'ENOSPC') log.warn({ op, path, code }, 'the disk that holds the state directory is full: free space there (deletes keep their content in the recycle area, so they need some too)');
    else if (err instanceof FsError && !QUIET.has(code)) log.info({ op, path, code, why: err.message }, 'refused');
    else if (!(err instanceof FsError) && errno === -osConstants.errno.EIO) log.error({ op, path, err }, 'operation failed');
    else log.debug({ op, path, code }, 'failed');
    return errno;
  }

  /** Run an op, timed; a failure becomes an Errno (fail). `other`: a rename's or link's other name. */
  private async op<T>(name: string, path: string, who: Caller, fn: () => Promise<T>, other?: string): Promise<T> {
    const started = meter.start();
    try {
      return await fn();
    } catch (err) {
      throw new Errno(this.fail(name, path, err, who, other));
    } finally {
      meter.fuse(name, started);
    }
  }

  /** The access ACL of a path's node, or null (the mount root and main have none). */
  private async aclAt(path: string, who: Caller): Promise<Buffer | null> {
    const r = this.route(path, who);
    return (r && (await r.view.acl?.(r.rel))) ?? null;
  }

  private rootAttr(): Attr {
    const at = this.started;
    return { mode: constants.S_IFDIR | 0o755, size: 4096, uid: 0, gid: 0, nlink: 1, mtime: at, atime: at, ctime: at, blocks: 0, blksize: 4096 };
  }

  getattr(path: string, who: Caller): Promise<Attr> {
    return this.op('getattr', path, who, async () => {
      // The kernel looks a name up (getattr) before anything else uses it: the one place a view is made on demand (`<role>:<commit>`).
      if (this.router.resolve && path.indexOf('/', 1) < 0 && path.includes(':')) await this.router.resolve(path.slice(1));
      const r = this.route(path, who);
      return r ? r.view.getattr(r.rel) : this.rootAttr();
    });
  }

  /** Attributes through an open descriptor: a file unlinked while open has no path left. */
  fgetattr(fd: number, who: Caller): Promise<Attr> {
    return this.op('getattr', '', who, async () => {
      const { h } = await this.handle(fd, who);
      if (h.mode === 'content') throw fsError('ENOENT');
      return attrFromStats(await fstat(h.fd));
    });
  }

  /** The names only: the binding puts . and .. first, as on a disk. */
  readdir(path: string, who: Caller): Promise<string[]> {
    return this.op('readdir', path, who, async () => {
      const r = this.route(path, who);
      return r ? r.view.readdir(r.rel) : this.router.rootNames();
    });
  }

  readlink(path: string, who: Caller): Promise<string> {
    return this.op('readlink', path, who, async () => {
      const r = this.need(path, who);
      return r.view.readlink(r.rel);
    });
  }

  open(path: string, flags: number, who: Caller): Promise<number> {
    return this.op('open', path, who, async () => {
      const r = this.need(path, who);
      if (isWritable(r.view) && opensForWriting(flags)) mayWrite(r.view, who);
      // A run's read of main is recorded before the open is answered.
      const reader = r.view.kind === 'main' ? this.router.readerOf?.(r.view, who) : undefined;
      return this.files.open(r.view, who, flags, async () => {
        const h = await r.view.open(r.rel, flags);
        if (reader && h.oid) await reader.record(r.rel, h.oid);
        return h;
      });
    });
  }

  create(path: string, mode: number, who: Caller): Promise<number> {
    return this.op('create', path, who, async () => {
      const r = this.mutable(path, 'create', who);
      return by(who, r.view, this.files.open(r.view, who, constants.O_RDWR, () => r.view.create(r.rel, mode, who)));
    });
  }

  read(path: string, fd: number, buf: Buffer, pos: number, who: Caller): Promise<number> {
    return this.op('read', path, who, async () => {
      const { view, h } = await this.handle(fd, who);
      return view.read(h, buf, buf.length, pos);
    });
  }

  write(path: string, fd: number, buf: Buffer, pos: number, who: Caller): Promise<number> {
    return this.op('write', path, who, async () => {
      const { view, h } = await this.writableHandle(fd, 'write', who);
      return by(who, view, view.write(h, buf, buf.length, pos));
    });
  }

  release(path: string, fd: number, who: Caller): Promise<void> {
    return this.op('release', path, who, () => this.files.close(fd));
  }

  fsync(path: string, fd: number, who: Caller): Promise<void> {
    return this.op('fsync', path, who, async () => {
      await this.files.revive(fd, who, (p) => this.need(p, who));
      if (this.files.has(fd)) {
        const { view, h } = this.files.get(fd);
        return view.fsync(h);
      }
      const r = this.route(path, who);
      if (r) await r.view.fsync(null);
    });
  }

  fsyncdir(path: string, who: Caller): Promise<void> {
    return this.op('fsyncdir', path, who, async () => {
      const r = this.route(path, who);
      if (r) await r.view.fsync(null);
    });
  }

  truncate(path: string, size: number, who: Caller): Promise<void> {
    return this.change('truncate', path, who, (view, rel) => view.truncate(rel, size));
  }

  ftruncate(path: string, fd: number, size: number, who: Caller): Promise<void> {
    return this.op('ftruncate', path, who, async () => {
      const { view, h } = await this.writableHandle(fd, 'truncate', who);
      await by(who, view, view.ftruncate(h, size));
    });
  }

  unlink(path: string, who: Caller): Promise<void> {
    return this.change('unlink', path, who, (view, rel) => view.unlink(rel));
  }

  mkdir(path: string, mode: number, who: Caller): Promise<void> {
    return this.change('mkdir', path, who, (view, rel) => view.mkdir(rel, mode, who));
  }

  rmdir(path: string, who: Caller): Promise<void> {
    return this.change('rmdir', path, who, (view, rel) => view.rmdir(rel));
  }

  rename(from: string, to: string, who: Caller): Promise<void> {
    return this.op('rename', from, who, async () => {
      const p = this.pair(from, to, 'rename-from', who);
      await by(who, p.view, p.view.rename(p.a, p.b));
    }, to);
  }

  symlink(target: string, path: string, who: Caller): Promise<void> {
    return this.change('symlink', path, who, (view, rel) => view.symlink(target, rel, who));
  }

  link(from: string, to: string, who: Caller): Promise<void> {
    return this.op('link', to, who, async () => {
      const p = this.pair(from, to, 'link', who);
      await by(who, p.view, p.view.link(p.a, p.b));
    }, from);
  }

  mknod(path: string, mode: number, dev: number, who: Caller): Promise<void> {
    return this.change('mknod', path, who, (view, rel) => view.mknod(rel, mode, dev, who));
  }

  chmod(path: string, mode: number, who: Caller): Promise<void> {
    return this.change('chmod', path, who, (view, rel) => view.chmod(rel, mode));
  }

  chown(path: string, uid: number, gid: number, who: Caller): Promise<void> {
    return this.change('chmod', path, who, (view, rel) => view.chown(rel, uid, gid), 'chown');
  }

  utimens(path: string, atime: TimeArg, mtime: TimeArg, who: Caller): Promise<void> {
    return this.change('utimens', path, who, (view, rel) => view.utimens(rel, atime, mtime));
  }

  statfs(path: string, who: Caller): Promise<FsStats> {
    return this.op('statfs', path, who, async () => this.router.statfs(this.route(path, who)?.view));
  }

  /** The one extended attribute a view has: a node's access ACL (the binding answers every other name itself). */
  getacl(path: string, who: Caller): Promise<Buffer> {
    return this.op('getxattr', path, who, async () => {
      const acl = await this.aclAt(path, who);
      if (!acl) throw fsError('ENODATA');
      return acl;
    });
  }

  /** The names of a node's extended attributes, each ended by a NUL: its ACL's, when it has one. */
  listxattr(path: string, who: Caller): Promise<Buffer> {
    return this.op('listxattr', path, who, async () => Buffer.from((await this.aclAt(path, who)) ? `${ACL_ACCESS}\0` : ''));
  }

  /** A change by path in a writable view: `rule` the Mutation policy judges, `name` the op's own (metrics, refusals). */
  private change(rule: Mutation, path: string, who: Caller, fn: (view: WritableView, rel: string) => Promise<void>, name: string = rule): Promise<void> {
    return this.op(name, path, who, async () => {
      const r = this.mutable(path, rule, who);
      await by(who, r.view, fn(r.view, r.rel));
    });
  }
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

export type Ops = PathOps;
