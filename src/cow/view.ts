import type { Attr } from './attr.js';
import type { Caller } from '../util/owner.js';

/** A time utimens sets: now, left as it is (omit), seconds and nanoseconds, or milliseconds. */
export type TimeArg = 'now' | 'omit' | { sec: number; nsec: number } | number;

/** An open file: either a descriptor on the upper directory or the content of a git blob (read-only). */
export interface Handle {
  rel: string;
  fd: number | null;
  data: Buffer | null;
  writable: boolean;
  /** Written since it was last queued for a commit. */
  dirty: boolean;
  /** Size when opened: append-only files may not be written below it. */
  floor: number;
  /** Whether the file is append-only (asked once per open and rename, not per write). */
  appendOnly?: boolean;
  /** Largest size this handle has seen, for quota accounting. */
  size: number;
  /** The blob a file opened on main comes from: what a run's read manifest records for it. */
  oid?: string;
  /** The write lease in force when a branch file was opened for writing: it writes only while that lease lasts. */
  lease?: string;
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
  getattr(rel: string): Promise<Attr>;
  readdir(rel: string): Promise<string[]>;
  readlink(rel: string): Promise<string>;
  access(rel: string, mode: number): Promise<void>;
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
}

export const isWritable = (view: View): view is WritableView => view.kind === 'branch';
