import type { Attr } from '../cow/attr.js';
export { binding, type Connection, type Dispatch, type NativeBinding, type NativeMount } from '../util/addon.js';

/** Request kinds; native/nasfuse.h has the same numbers. */
export const OP = {
  LOOKUP: 1, GETATTR: 2, SETATTR: 3, READLINK: 4, MKNOD: 5, MKDIR: 6, UNLINK: 7, RMDIR: 8, SYMLINK: 9, RENAME: 10, LINK: 11,
  OPEN: 12, READ: 13, WRITE: 14, RELEASE: 15, FSYNC: 16, OPENDIR: 17, FSYNCDIR: 18, STATFS: 19, CREATE: 20,
  GETXATTR: 21, LISTXATTR: 22,
} as const;

/** setattr's `valid` bits (fuse_lowlevel.h). */
export const SET = { MODE: 1, UID: 2, GID: 4, SIZE: 8, ATIME: 16, MTIME: 32, ATIME_NOW: 128, MTIME_NOW: 256 } as const;

/** Words per attribute record, in the order native/replies.cc unpacks them. */
export const ATTR_WORDS = 14;

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
