import { MODE } from './types.js';

/**
 * What git does not keep of a file, directory or symlink (full mode, owner, group, times), kept beside the
 * tree in the same commit as one line of plain text:
 *
 *     mode=100600 uid=1000 gid=1000 atime=1700000000.123456789 mtime=1700000000.123456789
 *
 * A file's or symlink's record is `.nas-meta/<path>`. A directory's is `.nas-meta/<path>/.nas-meta` (the
 * root's `.nas-meta/.nas-meta`): inside the folder that holds its children's records, under a name no
 * versioned path may use, so the two never collide. The mode's type bits say what the record describes; a
 * record whose type is not the path's is ignored.
 *
 * One small blob per path, so a commit touches the records of what it changes and nothing else, a merge
 * carries them like any file, and `git clone` or an export takes them along. Views never show `.nas-meta/`;
 * PRs list a record's change as a change of its file (a directory's own record as a change of the folder).
 */

export const META_ROOT = '.nas-meta';
/** The name of a directory's own record in its records folder; refused as a name in versioned folders. */
export const DIR_RECORD = META_ROOT;

export interface FileMeta {
  /** st_mode: type and permission bits. */
  mode: number;
  uid: number;
  gid: number;
  /** Nanoseconds since the epoch. */
  atimeNs: bigint;
  mtimeNs: bigint;
}

/**
 * The permission bits to show for a file: the record's, except that git's exec bit wins where they disagree
 * (a merge can take the content and mode of one side and the record of the other).
 */
export function permsOf(meta: FileMeta, gitExec: boolean): number {
  const perms = meta.mode & 0o7777;
  if (gitExec === ((perms & 0o100) !== 0)) return perms;
  return gitExec ? perms | ((perms & 0o044) >> 2) | 0o100 : perms & ~0o111;
}

/**
 * The full mode a view shows for what git holds with `gitMode` and this record: setuid, setgid and sticky bits
 * included, which git's own modes (100644, 100755) cannot say. A symlink stays 120000, as git prints it.
 */
export function fullMode(gitMode: number, meta: FileMeta | null): number {
  if (gitMode === MODE.link) return gitMode;
  if (gitMode === MODE.tree) return MODE.tree | (meta ? meta.mode & 0o7777 : 0o755);
  return meta ? 0o100000 | permsOf(meta, gitMode === MODE.exec) : gitMode;
}

/** A file's or symlink's record; for a directory, the folder of every record below it (its own included). */
export const metaPath = (rel: string): string => `${META_ROOT}/${rel}`;
/** A directory's own record. */
export const dirMetaPath = (rel: string): string => (rel === '' ? `${META_ROOT}/${DIR_RECORD}` : `${META_ROOT}/${rel}/${DIR_RECORD}`);
/** Where the record for a path with this git mode lives. */
export const recordPath = (rel: string, gitMode: number): string => (gitMode === MODE.tree ? dirMetaPath(rel) : metaPath(rel));
export const isMetaPath = (path: string): boolean => path === META_ROOT || path.startsWith(`${META_ROOT}/`);

/** The path a record describes, given the record's path below `.nas-meta/`, and whether it is a directory's. */
export function recordSubject(inRecords: string): { path: string; dir: boolean } {
  if (inRecords === DIR_RECORD) return { path: '', dir: true };
  if (inRecords.endsWith(`/${DIR_RECORD}`)) return { path: inRecords.slice(0, -DIR_RECORD.length - 1), dir: true };
  return { path: inRecords, dir: false };
}

/** The path a record at this path of the tree describes. */
export const metaSubject = (path: string): { path: string; dir: boolean } => recordSubject(path.slice(META_ROOT.length + 1));

const S_IFMT = 0o170000;

/** Whether a record describes what git holds at its path (a file's record says nothing of a directory there). */
export function recordFits(meta: FileMeta, gitMode: number): boolean {
  const type = meta.mode & S_IFMT;
  if (gitMode === MODE.tree || gitMode === MODE.link) return type === gitMode;
  return type === 0o100000;
}

const time = (ns: bigint): string => {
  const sec = ns / 1_000_000_000n;
  const frac = (ns % 1_000_000_000n + 1_000_000_000n) % 1_000_000_000n;
  return `${ns < 0n && frac > 0n ? sec - 1n : sec}.${frac.toString().padStart(9, '0')}`;
};

export function formatMeta(m: FileMeta): string {
  return `mode=${m.mode.toString(8)} uid=${m.uid} gid=${m.gid} atime=${time(m.atimeNs)} mtime=${time(m.mtimeNs)}\n`;
}

/** The record, or null when the text is not one (a damaged record leaves the file as git shows it). */
export function parseMeta(text: string): FileMeta | null {
  const fields = new Map(text.trim().split(/\s+/).map((kv) => kv.split('=') as [string, string]));
  const ns = (v: string | undefined): bigint | null => {
    const m = /^(-?\d+)\.(\d{9})$/.exec(v ?? '');
    return m ? BigInt(m[1]) * 1_000_000_000n + BigInt(m[2]) : null;
  };
  const mode = /^[0-7]+$/.test(fields.get('mode') ?? '') ? parseInt(fields.get('mode')!, 8) : NaN;
  const id = (v: string | undefined) => (/^\d+$/.test(v ?? '') ? Number(v) : NaN);
  const uid = id(fields.get('uid'));
  const gid = id(fields.get('gid'));
  const atimeNs = ns(fields.get('atime'));
  const mtimeNs = ns(fields.get('mtime'));
  if (!Number.isInteger(mode) || !Number.isInteger(uid) || !Number.isInteger(gid) || atimeNs === null || mtimeNs === null) return null;
  return { mode, uid, gid, atimeNs, mtimeNs };
}
