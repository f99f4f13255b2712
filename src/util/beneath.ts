import fs from 'node:fs';
import { constants } from 'node:fs';
import { promisify } from 'node:util';
import { fsError, hasCode } from './errors.js';
import { sys } from './sys.js';

/**
 * Race-free file operations by root inside a tree that users can change (a branch's upper directory and its
 * scratch, a run's directory). A path string is never followed twice: every directory on the way is opened
 * one component at a time from the descriptor of the one above, without following a symbolic link, and the
 * last step acts on a name inside a directory held open. Swapping a directory for a link meanwhile gives
 * ELOOP or ENOTDIR, never a file outside the tree.
 *
 * The directory held open is named through /proc/<pid>/fd/<n>: the kernel resolves that to the very directory
 * the descriptor holds, and the one name after it is looked up there (an *at() call without a native binding).
 * What fn does with the name must not follow it: lstat, mkdir, rename, link, unlink, rmdir, lchown, symlink,
 * open with O_NOFOLLOW. A chmod follows: change modes through a descriptor (open with O_NOFOLLOW, then fchmod).
 */

const open = promisify(fs.open) as (path: string, flags: number, mode?: number) => Promise<number>;
const close = promisify(fs.close);
const fstat = promisify(fs.fstat) as (fd: number) => Promise<fs.Stats>;
const fchown = promisify(fs.fchown);
const fchmod = promisify(fs.fchmod);

const DIR = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * The name of what an open descriptor holds, resolved by the kernel to that inode whatever was renamed since.
 * Through this process's pid rather than /proc/self, so a child (git, mknod) can be handed the same name.
 */
export const fdPath = (fd: number): string => `/proc/${PROC_PID}/fd/${fd}`;

/** This process as the /proc mounted here numbers it (another PID namespace's /proc would name someone else). */
const PROC_PID = fs.readlinkSync('/proc/self');

/** Deeper than this, a tree is refused rather than walked: each level holds a descriptor while below it. */
const MAX_DEPTH = 512;

/** The components of a relative path, each checked: no empty, '.' or '..' one, no NUL. '' is the root. */
function components(rel: string): string[] {
  if (rel === '') return [];
  const parts = rel.split('/');
  for (const p of parts) {
    if (p === '' || p === '.' || p === '..' || p.includes('\0')) throw fsError('EINVAL', `${JSON.stringify(rel).slice(0, 80)} is not a plain relative path`);
  }
  return parts;
}

function split(rel: string): { dir: string; name: string } {
  const parts = components(rel);
  if (parts.length === 0) throw fsError('EINVAL', 'the root of a tree has no name in a parent');
  return { dir: parts.slice(0, -1).join('/'), name: parts[parts.length - 1] };
}

/** Open directory `name` inside the directory `at` names, never following a link: ELOOP (or ENOTDIR) where one stands. */
async function openDirIn(at: string, name: string): Promise<number> {
  try {
    return await open(`${at}/${name}`, DIR);
  } catch (e) {
    // O_DIRECTORY meets a link before O_NOFOLLOW does (ENOTDIR): say which it was.
    const link = hasCode(e, 'ELOOP') || (hasCode(e, 'ENOTDIR') && (await fs.promises.lstat(`${at}/${name}`).then((s) => s.isSymbolicLink(), () => false)));
    if (link) throw fsError('ELOOP', `${name} is a symbolic link; nothing is done through it`);
    if (hasCode(e, 'ENOTDIR')) throw fsError('ENOTDIR', `${name} is not a directory`);
    throw e;
  }
}

/** O_PATH (Linux): a descriptor that names an inode without opening it (no device is opened, no FIFO waits). */
const O_PATH = 0o10000000;

/**
 * chmod what stands at path itself, never a link's target: through an O_PATH descriptor of it, named by
 * /proc (a symlink refuses, as Linux keeps no modes on links).
 */
export async function chmodNoFollow(path: string, mode: number): Promise<void> {
  const fd = await open(path, O_PATH | constants.O_NOFOLLOW);
  try {
    await fs.promises.chmod(fdPath(fd), mode);
  } finally {
    await close(fd);
  }
}

export class Beneath {
  /**
   * `root` is a path only root controls (the Store's or the runs' own directory); everything below it may be a
   * user's. `own`: the tree is nasd's own, on its own disk, never inside the mount it serves, so it is walked
   * synchronously; a tree that may hold the mount (a target a user names, from '/') is walked asynchronously,
   * since nasd answers the mount's requests on the very thread that would wait.
   */
  constructor(readonly root: string, private readonly own = true) {}

  /**
   * Directory rel, opened in one openat2(2) from the root that follows no link on the way (the binding's
   * openBeneath: a few microseconds, where a walk of one asynchronous open per component cost a thread-pool trip
   * each); the caller closes it. Synchronous: the root is nasd's own directory, never inside its mount.
   */
  private openDir(rel: string): number {
    components(rel);
    try {
      return sys().openBeneath(this.root, rel);
    } catch (e) {
      if (hasCode(e, 'ELOOP')) throw fsError('ELOOP', `a symbolic link stands on the way to ${rel}; nothing is done through it`);
      if (hasCode(e, 'ENOTDIR')) throw fsError('ENOTDIR', `something on the way to ${rel} is not a directory`);
      throw e;
    }
  }

  /** The same one component at a time, each opened from the descriptor of the one above, asynchronously. */
  private async walkTo(rel: string): Promise<number> {
    let fd = await open(this.root, constants.O_RDONLY | constants.O_DIRECTORY);
    for (const name of components(rel)) {
      let next: number;
      try {
        next = await openDirIn(fdPath(fd), name);
      } finally {
        await close(fd);
      }
      fd = next;
    }
    return fd;
  }

  /** Run fn with a name for directory rel, held open meanwhile: names inside it are looked up in that very directory. */
  async inDir<T>(rel: string, fn: (dir: string) => Promise<T>): Promise<T> {
    const fd = this.own ? this.openDir(rel) : await this.walkTo(rel);
    try {
      return await fn(fdPath(fd));
    } finally {
      if (this.own) fs.closeSync(fd);
      else await close(fd);
    }
  }

  /** Run fn on rel's name inside its parent directory, which is held open meanwhile (see the module's comment). */
  async at<T>(rel: string, fn: (path: string) => Promise<T>): Promise<T> {
    const { dir, name } = split(rel);
    return this.inDir(dir, (at) => fn(`${at}/${name}`));
  }

  /** The same for two names at once (rename, link). */
  async at2<T>(a: string, b: string, fn: (pa: string, pb: string) => Promise<T>): Promise<T> {
    return this.at(a, (pa) => this.at(b, (pb) => fn(pa, pb)));
  }

  /** A regular file's content; a link or anything else standing there is refused (EINVAL). */
  async readFile(rel: string): Promise<Buffer> {
    return this.at(rel, async (p) => {
      const fh = await fs.promises.open(p, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch((e) => {
        throw hasCode(e, 'ELOOP') ? fsError('EINVAL', `${rel} is not a regular file`) : e;
      });
      try {
        if (!(await fh.stat()).isFile()) throw fsError('EINVAL', `${rel} is not a regular file`);
        return await fh.readFile();
      } finally {
        await fh.close();
      }
    });
  }

  /**
   * Make a new file at rel (never over anything: EEXIST) with this content, mode and owner, all set through the
   * descriptor it was made with.
   */
  async createFile(rel: string, content: Buffer | string, opts: { mode: number; uid?: number; gid?: number }): Promise<void> {
    await this.at(rel, async (p) => {
      const fh = await fs.promises.open(p, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, opts.mode);
      try {
        await fh.writeFile(content);
        if (opts.uid !== undefined) await fh.chown(opts.uid, opts.gid ?? -1);
        await fh.chmod(opts.mode);
      } finally {
        await fh.close();
      }
    });
  }

  /**
   * Make a new directory at rel (never over anything: EEXIST) with this mode and owner, set through a descriptor
   * of the very directory made (opened without following a link); no one but root can enter it meanwhile.
   */
  async mkdir(rel: string, opts: { mode: number; uid?: number; gid?: number }): Promise<void> {
    await this.at(rel, async (p) => {
      await fs.promises.mkdir(p, { mode: 0o700 });
      const fd = await open(p, DIR);
      try {
        if (opts.uid !== undefined) await fchown(fd, opts.uid, opts.gid ?? -1);
        await fchmod(fd, opts.mode);
      } finally {
        await close(fd);
      }
    });
  }

  /**
   * Remove rel and everything below it, without following a link and without leaving the root's filesystem (a
   * mount point below is refused with EXDEV, and nothing in it is touched). Gone already is fine.
   */
  async removeTree(rel: string): Promise<void> {
    const dev = (await fs.promises.stat(this.root)).dev;
    if (rel === '') return this.inDir('', (at) => emptyDir(at, dev, 0));
    await this.at(rel, (p) => removeEntry(p, dev, 0));
  }

  /**
   * Visit everything below directory rel (rel itself excluded) with its lstat, descending into the directories
   * `descend` allows; each directory is opened from its parent's descriptor without following a link, and a
   * mount point is not entered. A name gone by the time it is looked at, or not UTF-8, is passed over.
   */
  async walk(rel: string, visit: (rel: string, st: fs.Stats) => unknown, descend: (rel: string) => boolean = () => true): Promise<void> {
    const dev = (await fs.promises.stat(this.root)).dev;
    const below = async (dir: string, at: string, depth: number): Promise<void> => {
      for (const name of await fs.promises.readdir(at)) {
        const child = dir ? `${dir}/${name}` : name;
        const st = await fs.promises.lstat(`${at}/${name}`).catch((e) => {
          if (hasCode(e, 'ENOENT')) return null;
          throw e;
        });
        if (!st) continue;
        visit(child, st);
        if (!st.isDirectory() || st.dev !== dev || depth >= MAX_DEPTH || !descend(child)) continue;
        const fd = await openDirIn(at, name).catch((e) => {
          if (hasCode(e, 'ENOENT') || hasCode(e, 'ELOOP') || hasCode(e, 'ENOTDIR')) return null;
          throw e;
        });
        if (fd === null) continue;
        try {
          if ((await fstat(fd)).dev === dev) await below(child, fdPath(fd), depth + 1);
        } finally {
          await close(fd);
        }
      }
    };
    await this.inDir(rel, (at) => below(rel, at, 0)).catch((e) => {
      if (!(hasCode(e, 'ENOENT') || hasCode(e, 'ENOTDIR') || hasCode(e, 'ELOOP'))) throw e;
    });
  }
}

/** A name inside a directory held open, as bytes: a name that is not UTF-8 is removed as it is. */
type Name = string | Buffer;
const join = (dir: string, name: Name): Name => (typeof name === 'string' ? `${dir}/${name}` : Buffer.concat([Buffer.from(`${dir}/`), name]));

/**
 * Remove what stands at path (a name inside a directory held open): a directory with all it holds. A name
 * swapped between this level's own look and act is looked at again, a few times; what fails below is final.
 */
async function removeEntry(path: Name, dev: number, depth: number): Promise<void> {
  if (depth > MAX_DEPTH) throw fsError('ELOOP', `more than ${MAX_DEPTH} directories deep; not removed`);
  for (let round = 0; ; round++) {
    let st: fs.Stats;
    try {
      st = await fs.promises.lstat(path);
    } catch (e) {
      if (hasCode(e, 'ENOENT')) return;
      throw e;
    }
    let fd: number | null = null;
    try {
      if (!st.isDirectory()) return await fs.promises.unlink(path);
      if (st.dev !== dev) throw fsError('EXDEV', `${String(path)} is on another filesystem (a mount point); it is not removed`);
      fd = await open(path as string, DIR);
    } catch (e) {
      if (!isSwap(e) || round >= 8) throw e;
      continue;
    }
    try {
      if ((await fstat(fd)).dev !== dev) throw fsError('EXDEV', `${String(path)} is on another filesystem (a mount point); it is not removed`);
      await emptyDir(fdPath(fd), dev, depth + 1);
    } finally {
      await close(fd);
    }
    try {
      return await fs.promises.rmdir(path);
    } catch (e) {
      // Emptied, then filled or swapped again meanwhile: once more from the look.
      if (!isSwap(e) || round >= 8) throw e;
    }
  }
}

const isSwap = (e: unknown): boolean => ['ELOOP', 'ENOTDIR', 'EISDIR', 'ENOTEMPTY', 'ENOENT'].some((c) => hasCode(e, c));

async function emptyDir(dir: string, dev: number, depth: number): Promise<void> {
  for (const name of await fs.promises.readdir(dir, { encoding: 'buffer' })) await removeEntry(join(dir, name), dev, depth);
}
