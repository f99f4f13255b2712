/**
 * What git does not keep of a file (full mode, owner, group, times), kept beside the tree in the same commit:
 * `.nas-meta/<path>` holds one line of plain text for the file at `<path>`:
 *
 *     mode=100600 uid=1000 gid=1000 atime=1700000000.123456789 mtime=1700000000.123456789
 *
 * One small blob per file, so a commit touches the records of the files it changes and nothing else, a
 * merge carries them like any file, and `git clone` or an export takes them along. Views never show
 * `.nas-meta/`; PRs list a record's change as a change of its file.
 */

export const META_ROOT = '.nas-meta';

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

export const metaPath = (rel: string): string => `${META_ROOT}/${rel}`;
export const isMetaPath = (path: string): boolean => path === META_ROOT || path.startsWith(`${META_ROOT}/`);
/** The file a record describes. */
export const metaSubject = (path: string): string => path.slice(META_ROOT.length + 1);

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
