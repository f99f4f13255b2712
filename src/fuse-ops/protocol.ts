import type { Attr } from '../cow/attr.js';
import type { FsStats } from '../cow/view.js';

/**
 * The protocol between the binding and JS: native/protocol.h's table, one row per request kind, as types.
 * test/unit/protocol.test.ts reads protocol.h and fails when an op's code, fields or answer, or a layout's word
 * count, differs from what is here.
 */
export const OP = {
  LOOKUP: 1, GETATTR: 2, SETATTR: 3, READLINK: 4, MKNOD: 5, MKDIR: 6, UNLINK: 7, RMDIR: 8, SYMLINK: 9, RENAME: 10, LINK: 11,
  OPEN: 12, READ: 13, WRITE: 14, RELEASE: 15, FSYNC: 16, OPENDIR: 17, FSYNCDIR: 18, STATFS: 19, CREATE: 20,
  GETXATTR: 21, LISTXATTR: 22,
} as const;
export type OpName = keyof typeof OP;
export type Op = (typeof OP)[OpName];

/** What a request carries besides op, call, path and the caller, in protocol.h's FIELD_NAMES order. */
export interface Fields {
  /** The open handle (-1: none). */
  fh: number;
  /** setattr: which of `set` apply (SET bits). */
  valid: number;
  /** setattr: SETATTR_WORDS values (mode, uid, gid, size, atime s/ns, mtime s/ns). */
  set: Float64Array;
  mode: number;
  rdev: number;
  /** open's and create's flags; rename's RENAME_* flags. */
  flags: number;
  /** symlink: what the link points to. */
  target: string;
  /** rename and link: the other path. */
  to: string;
  /** read: where the bytes go; write: the bytes. */
  buffer: Buffer;
  offset: number;
  /** release: of a handle open for writing. */
  writing: boolean;
  datasync: boolean;
}
export const FIELD_NAMES = ['fh', 'valid', 'set', 'mode', 'rdev', 'flags', 'target', 'to', 'buffer', 'offset', 'writing', 'datasync'] as const satisfies ReadonlyArray<keyof Fields>;

/** What an answer holds, by kind (protocol.h's Answer). */
export interface Answers {
  none: void;
  entry: { attr: Float64Array };
  attr: { attr: Float64Array };
  text: { target: string };
  /** The new name's attributes and its directory's after the change. */
  made: { attr: Float64Array; dirs: Float64Array | null };
  /** The directories a change of names was made in, after it (null: one could not be read). */
  changed: { dirs: Float64Array | null };
  /** `fd`: the descriptor on disk the binding reads through (-1: none); `keepCache`: the kernel keeps its pages. */
  opened: { fh: number; keepCache: boolean; fd: number };
  created: { fh: number; attr: Float64Array; dirs: Float64Array | null; fd: number };
  count: { count: number };
  /** A written file's attributes as its last close left them (null: not read). */
  released: { attr: Float64Array | null };
  listing: { names: string[]; attrs: Float64Array };
  statfs: { stats: Float64Array };
  bytes: { bytes: Buffer };
}

/** One row per op: its fields and its answer kind (protocol.h's NAS_OPS; mutates, changes_names, by_handle stay native). */
export const OPS = {
  [OP.LOOKUP]: { name: 'lookup', fields: [], answer: 'entry' },
  [OP.GETATTR]: { name: 'getattr', fields: ['fh'], answer: 'attr' },
  [OP.SETATTR]: { name: 'setattr', fields: ['fh', 'valid', 'set'], answer: 'attr' },
  [OP.READLINK]: { name: 'readlink', fields: [], answer: 'text' },
  [OP.MKNOD]: { name: 'mknod', fields: ['mode', 'rdev'], answer: 'made' },
  [OP.MKDIR]: { name: 'mkdir', fields: ['mode'], answer: 'made' },
  [OP.UNLINK]: { name: 'unlink', fields: [], answer: 'changed' },
  [OP.RMDIR]: { name: 'rmdir', fields: [], answer: 'changed' },
  [OP.SYMLINK]: { name: 'symlink', fields: ['target'], answer: 'made' },
  [OP.RENAME]: { name: 'rename', fields: ['flags', 'to'], answer: 'changed' },
  [OP.LINK]: { name: 'link', fields: ['to'], answer: 'made' },
  [OP.OPEN]: { name: 'open', fields: ['flags'], answer: 'opened' },
  [OP.READ]: { name: 'read', fields: ['fh', 'buffer', 'offset'], answer: 'count' },
  [OP.WRITE]: { name: 'write', fields: ['fh', 'buffer', 'offset'], answer: 'count' },
  [OP.RELEASE]: { name: 'release', fields: ['fh', 'writing'], answer: 'released' },
  [OP.FSYNC]: { name: 'fsync', fields: ['fh', 'datasync'], answer: 'none' },
  [OP.OPENDIR]: { name: 'opendir', fields: [], answer: 'listing' },
  [OP.FSYNCDIR]: { name: 'fsyncdir', fields: [], answer: 'none' },
  [OP.STATFS]: { name: 'statfs', fields: [], answer: 'statfs' },
  [OP.CREATE]: { name: 'create', fields: ['mode', 'flags'], answer: 'created' },
  [OP.GETXATTR]: { name: 'getxattr', fields: [], answer: 'bytes' },
  [OP.LISTXATTR]: { name: 'listxattr', fields: [], answer: 'bytes' },
} as const satisfies { [K in Op]: { name: string; fields: ReadonlyArray<keyof Fields>; answer: keyof Answers } };

/** What every request carries: its op, the id JS answers it by, the path (empty: a file unlinked while open), the caller. */
interface Common<K extends Op> {
  op: K;
  call: number;
  path: string;
  uid: number;
  gid: number;
  pid: number;
  umask: number;
}
type RequestOf<K extends Op> = Common<K> & { [F in (typeof OPS)[K]['fields'][number]]: Fields[F] };
/** A request of kind K; with K a union, any one of them (what the binding hands the dispatcher). */
export type Request<K extends Op = Op> = { [P in K]: RequestOf<P> }[K];
export type Answer<K extends Op> = Answers[(typeof OPS)[K]['answer']];

/** setattr's `valid` bits (fuse_lowlevel.h's FUSE_SET_ATTR_*). */
export const SET = { MODE: 1, UID: 2, GID: 4, SIZE: 8, ATIME: 16, MTIME: 32, ATIME_NOW: 128, MTIME_NOW: 256 } as const;

/** Words per attribute record (ino, mode, nlink, uid, gid, rdev, size, blocks, atime s/ns, mtime s/ns, ctime s/ns). */
export const ATTR_WORDS = 14;
export const SETATTR_WORDS = 8;
export const STATFS_WORDS = 11;

const BILLION = 1_000_000_000n;

function putTime(out: Float64Array, at: number, ns: bigint | undefined, date: Date): void {
  if (ns !== undefined) {
    let sec = ns / BILLION;
    let nsec = ns % BILLION;
    if (nsec < 0n) {
      nsec += BILLION;
      sec -= 1n;
    }
    out[at] = Number(sec);
    out[at + 1] = Number(nsec);
  } else {
    const ms = date.getTime();
    const sec = Math.floor(ms / 1000);
    out[at] = sec;
    out[at + 1] = Math.round((ms - sec * 1000) * 1e6);
  }
}

/** Write an Attr into `out` at record `i`. */
export function packAttr(attr: Attr, out: Float64Array = new Float64Array(ATTR_WORDS), i = 0): Float64Array {
  const at = i * ATTR_WORDS;
  out[at] = attr.ino ?? 0;
  out[at + 1] = attr.mode;
  out[at + 2] = attr.nlink;
  out[at + 3] = attr.uid;
  out[at + 4] = attr.gid;
  out[at + 5] = attr.rdev ?? 0;
  out[at + 6] = attr.size;
  out[at + 7] = attr.blocks;
  putTime(out, at + 8, attr.atimeNs, attr.atime);
  putTime(out, at + 10, attr.mtimeNs, attr.mtime);
  putTime(out, at + 12, attr.ctimeNs, attr.ctime);
  return out;
}

/** statfs's answer, STATFS_WORDS words in protocol.h's order. */
export const packStatfs = (f: FsStats): Float64Array =>
  Float64Array.of(f.bsize, f.frsize, f.blocks, f.bfree, f.bavail, f.files, f.ffree, f.favail, f.fsid, f.flag, f.namemax);
