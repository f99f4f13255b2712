import type { Attr } from './attr.js';
import type { Caller, Owner } from '../util/owner.js';

/** A time utimens sets: now, left as it is (omit), seconds and nanoseconds, or milliseconds. */
export type TimeArg = 'now' | 'omit' | { sec: number; nsec: number } | number;

/**
 * An open file, one type per open mode: fuse-ops keeps it and hands it back to the view that opened it.
 * Every mode has the path and a size; only content from git names its blob.
 */
export type Handle = ContentHandle | ReadHandle | WriteHandle;

/** Content read once from git (a directory's is empty), served from memory: read-only. */
export interface ContentHandle {
  readonly mode: 'content';
  rel: string;
  data: Buffer;
  size: number;
  /** The blob a file opened on main comes from: what a run's read manifest records for it. */
  oid?: string;
}

/** A descriptor on a file of a branch's upper directory, opened read-only. */
export interface ReadHandle {
  readonly mode: 'read';
  rel: string;
  fd: number;
  /** Size when opened. */
  size: number;
  oid?: never;
}

/** A descriptor on a file of a branch's upper directory, opened for writing (see branch/open-files.ts). */
export interface WriteHandle {
  readonly mode: 'write';
  rel: string;
  fd: number;
  /** The file's size as this handle last left it (an append-only file's floor once it is renamed). */
  size: number;
  /** Opened with O_APPEND: every write lands at the file's end. */
  append: boolean;
  /** Written since it was last queued for a commit. */
  dirty: boolean;
  /** Whether the file is append-only (asked once per open and rename, not per write). */
  appendOnly: boolean;
  /** Append-only files are not written below this: their size when opened, then their end as written. */
  floor: number;
  /** The write lease in force when it was opened: it writes only while that lease lasts. */
  lease?: string;
  /** The binding's part in its writes (write-grants.ts): absent when it was not offered any. */
  grant?: GrantLink;
  oid?: never;
}

/** What a handle's writes the binding may answer alone: up to `limit` bytes from the start, never below `floor` when append-only. */
export interface GrantTerms {
  size: number;
  limit: number;
  floor: number;
  /** The account that opened the file: another one's write through the descriptor comes to JS, to be named. */
  uid: number;
  append: boolean;
  appendOnly: boolean;
}

/** What was written under a grant since it was last settled: the file's end, an append-only file's floor. */
export interface Settled {
  size: number;
  floor: number;
  wrote: boolean;
  /** A write failed or was short: the file is counted again from its descriptor. */
  failed: boolean;
}

/** The binding's side of write grants, by the handle number the kernel uses (fuse-ops/mount.ts). */
export interface GrantDesk {
  grant(fh: number, fd: number, terms: GrantTerms): boolean;
  settle(fh: number, revoke: boolean): Settled | null;
}

/** A write handle's tie to the binding: its handle number, who opened it, and the room its grant reserved while live. */
export interface GrantLink {
  fh: number;
  desk: GrantDesk;
  uid: number;
  live: boolean;
  limit: number;
  reserved: number;
}

/** A handle on content held in memory. */
export const contentHandle = (rel: string, data: Buffer, oid?: string): ContentHandle => ({ mode: 'content', rel, data, size: data.length, oid });

/** Read from content held in memory, as pread(2) would. */
export function readContent(h: ContentHandle, buf: Buffer, len: number, pos: number): number {
  if (pos >= h.data.length) return 0;
  return h.data.copy(buf, 0, pos, Math.min(h.data.length, pos + len));
}

export interface FsStats {
  bsize: number;
  frsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
  files: number;
  ffree: number;
  favail: number;
  fsid: number;
  flag: number;
  namemax: number;
}

/**
 * A mounted Home: its main line (read-only) or one branch. fuse-ops routes each request to a view by the
 * first path component and calls these with the rest of the path ('' for the view's root).
 * Every method reports failure by throwing FsError (or a Node system error), never by return value.
 */
export interface View {
  readonly kind: 'main' | 'branch';
  readonly name: string;
  /** The Home's owner account (what has no metadata record is its). */
  readonly owner: Owner;
  getattr(rel: string): Promise<Attr>;
  readdir(rel: string): Promise<string[]>;
  readlink(rel: string): Promise<string>;
  access(rel: string, mode: number): Promise<void>;
  /** rel's POSIX access ACL in the kernel's xattr form, or null (none: its mode says it all). Absent: no view has one. */
  acl?(rel: string): Promise<Buffer | null>;
  open(rel: string, flags: number): Promise<Handle>;
  read(h: Handle, buf: Buffer, len: number, pos: number): Promise<number>;
  release(h: Handle): Promise<void>;
  fsync(h: Handle | null): Promise<void>;
}

/** A view that takes writes: a branch. Main has none of these; policy names the errno it gives instead. */
export interface WritableView extends View {
  readonly kind: 'branch';
  /** `caller` (when the kernel said who asks) owns what is created. */
  create(rel: string, mode: number, caller?: Caller | null): Promise<Handle>;
  write(h: Handle, buf: Buffer, len: number, pos: number): Promise<number>;
  truncate(rel: string, size: number): Promise<void>;
  ftruncate(h: Handle, size: number): Promise<void>;
  unlink(rel: string): Promise<void>;
  mkdir(rel: string, mode: number, caller?: Caller | null): Promise<void>;
  rmdir(rel: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  symlink(target: string, rel: string, caller?: Caller | null): Promise<void>;
  link(from: string, to: string): Promise<void>;
  chmod(rel: string, mode: number): Promise<void>;
  chown(rel: string, uid: number, gid: number): Promise<void>;
  utimens(rel: string, atime: TimeArg, mtime: TimeArg): Promise<void>;
  mknod(rel: string, mode: number, dev: number, caller?: Caller | null): Promise<void>;
  /** The kernel said which account made a change in this view: the next commit names it (Nas-Writers). */
  changedBy(uid: number): void;
  /** Whether this account may change the view at all (whatever the files' modes say). */
  mayWrite(uid: number): boolean;
  /** h, open for writing by `uid` as handle `fh`: its writes may be answered by the binding (write-grants.ts). */
  offerWrites(h: Handle, fh: number, desk: GrantDesk, uid: number): void;
}

export const isWritable = (view: View): view is WritableView => view.kind === 'branch';
