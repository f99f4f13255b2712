import type { BigIntStats } from 'node:fs';
import { constants } from 'node:fs';
import { MODE } from '../store/store.js';
import type { Owner } from '../util/owner.js';

export type { Owner } from '../util/owner.js';

/**
 * What getattr reports, in the field names fuse-ops packs for the binding. The `*Ns` times (nanoseconds) win over the
 * Date fields where the binding knows them; `ino` is shown as the inode number (the mount uses use_ino).
 */
export interface Attr {
  mode: number;
  size: number;
  uid: number;
  gid: number;
  nlink: number;
  mtime: Date;
  atime: Date;
  ctime: Date;
  mtimeNs?: bigint;
  atimeNs?: bigint;
  ctimeNs?: bigint;
  ino?: number;
  blocks: number;
  blksize: number;
  /** The device a device node stands for. */
  rdev?: number;
}

const { S_IFDIR, S_IFREG, S_IFLNK } = constants;

/**
 * A file in an upper directory, as the disk keeps it: its own owner, mode, times (nanoseconds) and inode.
 * Directories report nlink 1: a merged directory's real link count is unknown, and 1 tells `find` not to
 * use its leaf optimisation (which would skip subdirectories that exist only in git).
 */
export function attrFromStats(st: BigIntStats): Attr {
  const dir = st.isDirectory();
  return {
    mode: Number(st.mode),
    size: dir ? 4096 : Number(st.size),
    uid: Number(st.uid),
    gid: Number(st.gid),
    nlink: dir ? 1 : Number(st.nlink),
    mtime: st.mtime,
    atime: st.atime,
    ctime: st.ctime,
    mtimeNs: st.mtimeNs,
    atimeNs: st.atimeNs,
    ctimeNs: st.ctimeNs,
    ino: Number(st.ino),
    blocks: Number(st.blocks),
    blksize: 4096,
    ...(st.rdev ? { rdev: Number(st.rdev) } : {}),
  };
}

/** Attributes of an object in git: the mode git keeps, the Home's owner, one time for every timestamp. */
export function attrFromGit(mode: number, size: number, time: Date, owner: Owner, ino?: number): Attr {
  const type = mode === MODE.tree ? S_IFDIR | 0o755 : mode === MODE.link ? S_IFLNK | 0o777 : mode === MODE.exec ? S_IFREG | 0o755 : S_IFREG | 0o644;
  return {
    mode: type,
    size: mode === MODE.tree ? 4096 : size,
    uid: owner.uid,
    gid: owner.gid,
    nlink: 1,
    mtime: time,
    atime: time,
    ctime: time,
    ...(ino !== undefined ? { ino } : {}),
    blocks: Math.ceil(size / 512),
    blksize: 4096,
  };
}

/**
 * The inode number of a path served from git: the same for the life of the mount and across restarts
 * (a 52-bit hash of the view and path), above every number a disk gives (bit 52 set), and below
 * 2^53 so it survives JavaScript numbers.
 */
export function gitIno(view: string, rel: string): number {
  // Two 32-bit FNV-1a hashes from different seeds, 26 bits of each: fast on every getattr.
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  const key = `${view}\0${rel}`;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  return 2 ** 52 + (a >>> 6) * 2 ** 26 + (b >>> 6);
}

/** The git mode for a file in an upper directory: only the owner's exec bit survives. */
export function gitModeOf(st: { isSymbolicLink(): boolean; mode: number | bigint }): number {
  if (st.isSymbolicLink()) return MODE.link;
  return Number(st.mode) & 0o100 ? MODE.exec : MODE.file;
}
