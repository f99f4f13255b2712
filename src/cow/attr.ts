import type { Stats } from 'node:fs';
import { constants } from 'node:fs';
import { MODE } from '../store/store.js';

/** What getattr reports, in the field names fuse-native expects. */
export interface Attr {
  mode: number;
  size: number;
  uid: number;
  gid: number;
  nlink: number;
  mtime: Date;
  atime: Date;
  ctime: Date;
  blocks: number;
  blksize: number;
  /** The device a device node stands for. */
  rdev?: number;
}

export type { Owner } from '../util/owner.js';
import type { Owner } from '../util/owner.js';

const { S_IFDIR, S_IFREG, S_IFLNK } = constants;

/**
 * Directories report nlink 1: a merged directory's real link count is unknown, and 1 tells `find` not to
 * use its leaf optimisation (which would skip subdirectories that exist only in git).
 */
export function attrFromStats(st: Stats, owner: Owner): Attr {
  return {
    mode: st.mode,
    size: st.isDirectory() ? 4096 : st.size,
    uid: owner.uid,
    gid: owner.gid,
    nlink: st.isDirectory() ? 1 : st.nlink,
    mtime: st.mtime,
    atime: st.atime,
    ctime: st.ctime,
    blocks: st.blocks,
    blksize: 4096,
    ...(st.rdev ? { rdev: st.rdev } : {}),
  };
}

/** Attributes of an object in git: the mode git keeps, the head commit's time for every timestamp. */
export function attrFromGit(mode: number, size: number, time: Date, owner: Owner): Attr {
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
    blocks: Math.ceil(size / 512),
    blksize: 4096,
  };
}

/** The git mode for a file in an upper directory: only the owner's exec bit survives. */
export function gitModeOf(st: Stats): number {
  if (st.isSymbolicLink()) return MODE.link;
  return st.mode & 0o100 ? MODE.exec : MODE.file;
}
