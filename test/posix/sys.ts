import fs from 'node:fs/promises';
import { constants, type BigIntStats } from 'node:fs';
import { run } from '../helpers.js';
import { toolFailure } from './case.js';

/**
 * The filesystem calls a POSIX case makes, and the place it runs in. On a native directory and through the
 * mount they are Node's own calls on real paths (nodeSys below, with the few Node lacks made by a child
 * process); in process they are a branch view's methods (in-process.ts). A case written against `Sys` runs
 * on both; a case that needs a real path (a tool, another process) says so with `mountOnly`.
 */

/** A time for utimensat: seconds and nanoseconds, UTIME_NOW or UTIME_OMIT. */
export type TimeSpec = 'now' | 'omit' | { sec: number; nsec: number };

export interface SysStats {
  mode: number;
  size: number;
  nlink: number;
  ino: number;
  uid: number;
  gid: number;
  rdev: number;
  atimeMs: number;
  mtimeMs: number;
  atimeNs: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isCharacterDevice(): boolean;
}

export interface SysDirent {
  name: string;
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
}

/** An open file. `write` writes all of data, at `position` or (none given) at the descriptor's offset. */
export interface SysHandle {
  write(data: string | Buffer, position?: number): Promise<unknown>;
  read(buf: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
  truncate(len: number): Promise<void>;
  stat(): Promise<SysStats>;
  close(): Promise<void>;
}

export type OpenFlags = 'r' | 'r+' | 'w' | 'wx' | 'a';

export interface Sys {
  readFile(p: string): Promise<Buffer>;
  readFile(p: string, encoding: 'utf8'): Promise<string>;
  writeFile(p: string, data: string | Buffer, opts?: { mode?: number }): Promise<void>;
  appendFile(p: string, data: string | Buffer): Promise<void>;
  open(p: string, flags: OpenFlags, mode?: number): Promise<SysHandle>;
  truncate(p: string, len: number): Promise<void>;
  stat(p: string): Promise<SysStats>;
  lstat(p: string): Promise<SysStats>;
  readdir(p: string): Promise<string[]>;
  readdir(p: string, opts: { withFileTypes: true }): Promise<SysDirent[]>;
  mkdir(p: string, opts?: { recursive?: boolean; mode?: number }): Promise<void>;
  rmdir(p: string): Promise<void>;
  unlink(p: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  symlink(target: string, p: string): Promise<void>;
  readlink(p: string): Promise<string>;
  link(existing: string, p: string): Promise<void>;
  chmod(p: string, mode: number): Promise<void>;
  chown(p: string, uid: number, gid: number): Promise<void>;
  lchown(p: string, uid: number, gid: number): Promise<void>;
  /** utimes(2), in seconds, following a symbolic link (Node's fs.utimes). */
  utimes(p: string, atime: number, mtime: number): Promise<void>;
  /** utimensat(2) with AT_SYMLINK_NOFOLLOW: nanoseconds, UTIME_NOW, UTIME_OMIT. */
  lutimens(p: string, atime: TimeSpec, mtime: TimeSpec): Promise<void>;
  /** mknod(2): a FIFO, a socket's inode or a device node (the caller's umask applies). */
  mknod(p: string, mode: number, dev: number): Promise<void>;
}

/** The calls a case makes as another user. */
export interface UserSys {
  writeFile(p: string, data: string): Promise<void>;
  appendFile(p: string, data: string): Promise<void>;
  mkdir(p: string): Promise<void>;
  readdir(p: string): Promise<string[]>;
}

/** What a case may ask of the place it runs in, beside filesystem calls. */
export interface Place {
  /** Run a real tool on paths of the place; its failure becomes the errno its message names. */
  tool(cmd: string, ...args: string[]): Promise<string>;
  /** The same calls, made by another user (uid and gid, no supplementary groups). */
  as(uid: number, gid: number): UserSys;
  /** Make the kernel forget the names and attributes it caches (drop_caches). */
  dropCaches(): Promise<void>;
}

/** A case that needs a real path (a tool, another process) was run where there is none: a case to declare mountOnly. */
export class NeedsMount extends Error {}

const { S_IFMT, S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK, S_IFCHR } = constants;

/** Stats from plain fields: the kind is read from the mode, as stat(2) callers do. */
export function statsOf(f: Omit<SysStats, `is${string}` | 'atimeMs' | 'mtimeMs'>): SysStats {
  const kind = f.mode & S_IFMT;
  return {
    ...f,
    atimeMs: Number(f.atimeNs) / 1e6,
    mtimeMs: Number(f.mtimeNs) / 1e6,
    isFile: () => kind === S_IFREG,
    isDirectory: () => kind === S_IFDIR,
    isSymbolicLink: () => kind === S_IFLNK,
    isFIFO: () => kind === S_IFIFO,
    isSocket: () => kind === S_IFSOCK,
    isCharacterDevice: () => kind === S_IFCHR,
  };
}

const fromNode = (st: BigIntStats): SysStats =>
  statsOf({
    mode: Number(st.mode), size: Number(st.size), nlink: Number(st.nlink), ino: Number(st.ino), uid: Number(st.uid), gid: Number(st.gid),
    rdev: Number(st.rdev), atimeNs: st.atimeNs, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs,
  });

/**
 * The syscalls Node lacks (mknod, utimensat with UTIME_OMIT and nanoseconds), in a child process:
 * `<op> <path> <args...>`; a failure exits 3 with the errno's name on stderr.
 */
const SYSCALLS = `
import ctypes, errno, os, sys
op, path, args = sys.argv[1], sys.argv[2], sys.argv[3:]
class T(ctypes.Structure):
    _fields_ = [('sec', ctypes.c_long), ('nsec', ctypes.c_long)]
def spec(s):
    if s == 'now': return T(0, (1 << 30) - 1)
    if s == 'omit': return T(0, (1 << 30) - 2)
    sec, nsec = s.split('.')
    return T(int(sec), int(nsec))
try:
    if op == 'mknod':
        os.mknod(path, int(args[0]), int(args[1]))
    elif op == 'utimens':
        libc = ctypes.CDLL(None, use_errno=True)
        times = (T * 2)(spec(args[0]), spec(args[1]))
        # AT_FDCWD, AT_SYMLINK_NOFOLLOW
        if libc.utimensat(-100, os.fsencode(path), times, 0x100) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    else:
        raise SystemExit('unknown op ' + op)
except OSError as e:
    sys.stderr.write(errno.errorcode.get(e.errno, 'EIO'))
    sys.exit(3)
`;

async function syscall(op: string, p: string, ...args: string[]): Promise<string> {
  const r = await run('python3', ['-c', SYSCALLS, op, p, ...args]);
  if (r.code === 0) return r.stdout;
  if (r.code === 3) throw Object.assign(new Error(`${op} ${p}: ${r.stderr.trim()}`), { code: r.stderr.trim() });
  throw new Error(`${op} ${p}: exited ${r.code}: ${r.stderr}`);
}

const spec = (t: TimeSpec) => (typeof t === 'string' ? t : `${t.sec}.${t.nsec}`);

function nodeHandle(fh: fs.FileHandle): SysHandle {
  return {
    write: (data, position) => (typeof data === 'string' ? fh.write(data, position) : fh.write(data, 0, data.length, position)),
    read: (buf, offset, length, position) => fh.read(buf, offset, length, position),
    truncate: (len) => fh.truncate(len),
    stat: async () => fromNode(await fh.stat({ bigint: true })),
    close: () => fh.close(),
  };
}

/** Node's own calls on real paths: the native directory and the mount. */
export const nodeSys: Sys = {
  readFile: ((p: string, encoding?: 'utf8') => (encoding ? fs.readFile(p, encoding) : fs.readFile(p))) as Sys['readFile'],
  writeFile: (p, data, opts) => fs.writeFile(p, data, opts),
  appendFile: (p, data) => fs.appendFile(p, data),
  open: async (p, flags, mode) => nodeHandle(await fs.open(p, flags, mode)),
  truncate: (p, len) => fs.truncate(p, len),
  stat: async (p) => fromNode(await fs.stat(p, { bigint: true })),
  lstat: async (p) => fromNode(await fs.lstat(p, { bigint: true })),
  readdir: ((p: string, opts?: { withFileTypes: true }) => (opts ? fs.readdir(p, opts) : fs.readdir(p))) as Sys['readdir'],
  mkdir: async (p, opts) => void (await fs.mkdir(p, opts)),
  rmdir: (p) => fs.rmdir(p),
  unlink: (p) => fs.unlink(p),
  rename: (from, to) => fs.rename(from, to),
  symlink: (target, p) => fs.symlink(target, p),
  readlink: (p) => fs.readlink(p),
  link: (existing, p) => fs.link(existing, p),
  chmod: (p, mode) => fs.chmod(p, mode),
  chown: (p, uid, gid) => fs.chown(p, uid, gid),
  lchown: (p, uid, gid) => fs.lchown(p, uid, gid),
  utimes: (p, atime, mtime) => fs.utimes(p, atime, mtime),
  lutimens: async (p, atime, mtime) => void (await syscall('utimens', p, spec(atime), spec(mtime))),
  mknod: async (p, mode, dev) => void (await syscall('mknod', p, String(mode), String(dev))),
};

/**
 * Calls made as another user on real paths: a shell under that uid and gid (setpriv), no supplementary
 * groups; a failure is the errno its message names.
 */
function userSys(uid: number, gid: number): UserSys {
  const as = async (script: string, ...args: string[]) => {
    const r = await run('setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', 'sh', '-c', script, 'sh', ...args]);
    if (r.code === 0) return r.stdout;
    throw toolFailure('sh', r.stderr);
  };
  return {
    writeFile: async (p, data) => void (await as('printf %s "$2" > "$1"', p, data)),
    appendFile: async (p, data) => void (await as('printf %s "$2" >> "$1"', p, data)),
    mkdir: async (p) => void (await as('mkdir -- "$1"', p)),
    readdir: async (p) => (await as('ls -A1 -- "$1"', p)).split('\n').filter((n) => n !== ''),
  };
}

/** A place with real paths: a native directory, or a directory of the mount. */
export const pathPlace: Place = {
  async tool(cmd, ...args) {
    const r = await run(cmd, args);
    if (r.code === 0) return r.stdout;
    throw toolFailure(cmd, r.stderr);
  },
  as: userSys,
  dropCaches: () => fs.writeFile('/proc/sys/vm/drop_caches', '3'),
};
