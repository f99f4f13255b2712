import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { constants } from 'node:fs';
import pino from 'pino';
import { BranchView } from '../../src/cow/branch/branch-view.js';
import type { Attr } from '../../src/cow/attr.js';
import type { Handle, WritableView } from '../../src/cow/view.js';
import type { Caller } from '../../src/util/owner.js';
import { Store } from '../../src/store/store.js';
import { Trash } from '../../src/trash/trash.js';
import { compileRules } from '../../src/policy/policy.js';
import { defaultTemplate } from '../../src/home/template.js';
import { removeTree, run } from '../helpers.js';
import { NeedsMount, statsOf, type OpenFlags, type Place, type Sys, type SysDirent, type SysHandle, type SysStats, type TimeSpec } from './sys.js';

/**
 * The in-process target: the POSIX cases on a branch view called directly, with no mount and no FUSE (as
 * rclone's vfstest runs on its VFS). `ViewSys` stands in for the kernel between a case and the view: it
 * walks paths (lookups, symbolic links), makes the checks the kernel makes before it asks a filesystem
 * (EEXIST for a name that exists, the types of rename's two names, ENAMETOOLONG past PATH_MAX), applies the
 * caller's umask, and calls the view's methods as fuse-ops would, with the caller for what is created.
 * O_TRUNC goes as the mount's kernel sends it (no FUSE_CAP_ATOMIC_O_TRUNC): the open without it, then the
 * view's truncate to 0 by path (SETATTR with no handle); if that fails, the file is released and open(2) fails.
 * What it does not do is the kernel's permission checks (default_permissions) and caching: cases that need
 * those, or a real path for a tool or another process, are mount-only.
 */

/** Where the view's root shows in a case's paths: a name no tool can make (nothing is written under /proc). */
export const IN_PROCESS_ROOT = '/proc/nas-in-process';

const { O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, S_IFMT, S_IFREG, S_IFDIR, S_IFLNK } = constants;
const FLAGS: Record<OpenFlags, number> = {
  r: O_RDONLY, 'r+': O_RDWR, w: O_WRONLY | O_CREAT | O_TRUNC, wx: O_WRONLY | O_CREAT | O_TRUNC | O_EXCL, a: O_WRONLY | O_CREAT | O_APPEND,
};
/** The largest write the mount passes on at once (maxWrite): bigger writes reach the view in pieces of this size. */
const MAX_WRITE = 131072;
const PATH_MAX = 4096;
const UMASK = (() => {
  const mask = process.umask(0o022);
  process.umask(mask);
  return mask;
})();
const SELF: Caller = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, pid: process.pid };

const errno = (code: string, what: string) => Object.assign(new Error(`${code}: ${what}`), { code });
const kind = (a: Attr) => a.mode & S_IFMT;
const join = (dir: string, name: string) => (dir === '' ? name : `${dir}/${name}`);

function statsOfAttr(a: Attr): SysStats {
  const ns = (exact: bigint | undefined, d: Date) => exact ?? BigInt(d.getTime()) * 1_000_000n;
  return statsOf({
    mode: a.mode, size: a.size, nlink: a.nlink, ino: a.ino ?? 0, uid: a.uid, gid: a.gid, rdev: a.rdev ?? 0,
    atimeNs: ns(a.atimeNs, a.atime), mtimeNs: ns(a.mtimeNs, a.mtime), ctimeNs: ns(a.ctimeNs, a.ctime),
  });
}

const timeOf = (seconds: number): TimeSpec => {
  const sec = Math.floor(seconds);
  return { sec, nsec: Math.round((seconds - sec) * 1e9) };
};

/** The kernel's part, in the simplest form that lets the cases run on a view: see the comment at the top. */
export class ViewSys implements Sys {
  constructor(private readonly view: WritableView, private readonly caller: Caller = SELF) {}

  /** The same calls as another user: the view hears that caller (and gives it what it makes); nothing checks permissions. */
  as(uid: number, gid: number): ViewSys {
    return new ViewSys(this.view, { uid, gid, pid: process.pid });
  }

  readFile(p: string): Promise<Buffer>;
  readFile(p: string, encoding: 'utf8'): Promise<string>;
  async readFile(p: string, encoding?: 'utf8'): Promise<Buffer | string> {
    const fh = await this.open(p, 'r');
    const parts: Buffer[] = [];
    try {
      for (let pos = 0; ;) {
        const buf = Buffer.alloc(MAX_WRITE);
        const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
        if (bytesRead === 0) break;
        parts.push(buf.subarray(0, bytesRead));
        pos += bytesRead;
      }
    } finally {
      await fh.close();
    }
    const data = Buffer.concat(parts);
    return encoding ? data.toString(encoding) : data;
  }

  async writeFile(p: string, data: string | Buffer, opts?: { mode?: number }): Promise<void> {
    const fh = await this.open(p, 'w', opts?.mode);
    try {
      await fh.write(data);
    } finally {
      await fh.close();
    }
  }

  async appendFile(p: string, data: string | Buffer): Promise<void> {
    const fh = await this.open(p, 'a');
    try {
      await fh.write(data);
    } finally {
      await fh.close();
    }
  }

  /**
   * open(2): O_CREAT makes the file through create (as the kernel does for a name that is not there), else open;
   * O_TRUNC on a file that was there is the view's truncate after the open, as the kernel does it (see the top).
   */
  open(p: string, flags: OpenFlags, mode = 0o666): Promise<SysHandle> {
    return this.kernel(p, async () => {
      const f = FLAGS[flags];
      const rel = await this.walk(p, true);
      const there = await this.attr(rel);
      if (f & O_CREAT) {
        if (there && f & O_EXCL) throw errno('EEXIST', p);
        if (!there) return this.handle(await this.view.create(rel, mode & ~UMASK & 0o7777, this.caller), f);
      }
      const h = await this.view.open(rel, f & ~(O_CREAT | O_EXCL | O_TRUNC));
      // The kernel truncates regular files only.
      if (f & O_TRUNC && there && kind(there) === S_IFREG) {
        try {
          await this.view.truncate(rel, 0);
        } catch (e) {
          await this.view.release(h);
          throw e;
        }
      }
      return this.handle(h, f);
    });
  }

  truncate(p: string, len: number): Promise<void> {
    return this.kernel(p, async () => this.view.truncate(await this.walk(p, true), len));
  }

  stat(p: string): Promise<SysStats> {
    return this.kernel(p, async () => statsOfAttr(await this.view.getattr(await this.walk(p, true))));
  }

  lstat(p: string): Promise<SysStats> {
    return this.kernel(p, async () => statsOfAttr(await this.view.getattr(await this.walk(p, false))));
  }

  readdir(p: string): Promise<string[]>;
  readdir(p: string, opts: { withFileTypes: true }): Promise<SysDirent[]>;
  readdir(p: string, opts?: { withFileTypes: true }): Promise<string[] | SysDirent[]> {
    return this.kernel(p, async () => {
      const rel = await this.walk(p, true);
      // Node leaves . and .. out of what it returns.
      const names = (await this.view.readdir(rel)).filter((n) => n !== '.' && n !== '..');
      if (!opts?.withFileTypes) return names;
      return Promise.all(names.map(async (name) => {
        const st = statsOfAttr(await this.view.getattr(join(rel, name)));
        return { name, isFile: st.isFile, isDirectory: st.isDirectory, isSymbolicLink: st.isSymbolicLink };
      }));
    });
  }

  mkdir(p: string, opts?: { recursive?: boolean; mode?: number }): Promise<void> {
    return this.kernel(p, async () => {
      const mode = (opts?.mode ?? 0o777) & ~UMASK & 0o7777;
      if (!opts?.recursive) {
        const rel = await this.walk(p, false);
        if (await this.attr(rel)) throw errno('EEXIST', p);
        return this.view.mkdir(rel, mode, this.caller);
      }
      // Node's recursive mkdir: each missing directory in turn; one that exists is passed.
      const parts = p.slice(IN_PROCESS_ROOT.length).split('/').filter((n) => n !== '');
      for (let i = 1; i <= parts.length; i++) {
        const rel = await this.walk(`${IN_PROCESS_ROOT}/${parts.slice(0, i).join('/')}`, true);
        const there = await this.attr(rel);
        if (!there) await this.view.mkdir(rel, mode, this.caller);
        else if (kind(there) !== S_IFDIR) throw errno(i === parts.length ? 'EEXIST' : 'ENOTDIR', p);
      }
    });
  }

  rmdir(p: string): Promise<void> {
    return this.kernel(p, async () => {
      const rel = await this.walk(p, false);
      if (kind(await this.view.getattr(rel)) !== S_IFDIR) throw errno('ENOTDIR', p);
      await this.view.rmdir(rel);
    });
  }

  unlink(p: string): Promise<void> {
    return this.kernel(p, async () => {
      const rel = await this.walk(p, false);
      if (kind(await this.view.getattr(rel)) === S_IFDIR) throw errno('EISDIR', p);
      await this.view.unlink(rel);
    });
  }

  /** rename(2): the kernel compares the two names' types (and inodes) before it asks the filesystem. */
  rename(from: string, to: string): Promise<void> {
    return this.kernel(from, async () => {
      const a = await this.walk(from, false);
      const b = await this.walk(to, false);
      const src = await this.view.getattr(a);
      const dst = await this.attr(b);
      if (dst) {
        if (kind(src) === S_IFDIR && kind(dst) !== S_IFDIR) throw errno('ENOTDIR', to);
        if (kind(src) !== S_IFDIR && kind(dst) === S_IFDIR) throw errno('EISDIR', to);
        if (src.ino !== undefined && src.ino === dst.ino) return;
      }
      if (b.startsWith(`${a}/`)) throw errno('EINVAL', to);
      await this.view.rename(a, b);
    });
  }

  symlink(target: string, p: string): Promise<void> {
    return this.kernel(p, async () => {
      const rel = await this.walk(p, false);
      if (await this.attr(rel)) throw errno('EEXIST', p);
      await this.view.symlink(target, rel, this.caller);
    });
  }

  readlink(p: string): Promise<string> {
    return this.kernel(p, async () => this.view.readlink(await this.walk(p, false)));
  }

  link(existing: string, p: string): Promise<void> {
    return this.kernel(p, async () => {
      const a = await this.walk(existing, false);
      const b = await this.walk(p, false);
      if (kind(await this.view.getattr(a)) === S_IFDIR) throw errno('EPERM', existing);
      if (await this.attr(b)) throw errno('EEXIST', p);
      await this.view.link(a, b);
    });
  }

  chmod(p: string, mode: number): Promise<void> {
    return this.kernel(p, async () => this.view.chmod(await this.walk(p, true), mode));
  }

  chown(p: string, uid: number, gid: number): Promise<void> {
    return this.kernel(p, async () => this.view.chown(await this.walk(p, true), uid, gid));
  }

  lchown(p: string, uid: number, gid: number): Promise<void> {
    return this.kernel(p, async () => this.view.chown(await this.walk(p, false), uid, gid));
  }

  utimes(p: string, atime: number, mtime: number): Promise<void> {
    return this.kernel(p, async () => this.view.utimens(await this.walk(p, true), timeOf(atime), timeOf(mtime)));
  }

  lutimens(p: string, atime: TimeSpec, mtime: TimeSpec): Promise<void> {
    return this.kernel(p, async () => this.view.utimens(await this.walk(p, false), atime, mtime));
  }

  mknod(p: string, mode: number, dev: number): Promise<void> {
    return this.kernel(p, async () => {
      const rel = await this.walk(p, false);
      if (await this.attr(rel)) throw errno('EEXIST', p);
      await this.view.mknod(rel, (mode & S_IFMT) | (mode & 0o7777 & ~UMASK), dev, this.caller);
    });
  }

  // ---- the kernel's part ---------------------------------------------------------------------------

  /** An open file: the descriptor's offset, O_APPEND (every write at the end, whatever position is asked), writes cut at MAX_WRITE. */
  private handle(h: Handle, flags: number): SysHandle {
    let offset = 0;
    const view = this.view;
    return {
      write: (data, position) => this.kernel(h.rel, async () => {
        const buf = typeof data === 'string' ? Buffer.from(data) : data;
        const at = flags & O_APPEND ? (await view.getattr(h.rel)).size : position ?? offset;
        let done = 0;
        while (done < buf.length) {
          const piece = buf.subarray(done, done + MAX_WRITE);
          const n = await view.write(h, piece, piece.length, at + done);
          if (n === 0) break;
          done += n;
        }
        if (position === undefined || flags & O_APPEND) offset = at + done;
        return done;
      }),
      read: (buf, off, length, position) => this.kernel(h.rel, async () => ({ bytesRead: await view.read(h, buf.subarray(off), length, position) })),
      truncate: (len) => this.kernel(h.rel, () => view.ftruncate(h, len)),
      stat: () => this.kernel(h.rel, async () => statsOfAttr(await view.getattr(h.rel))),
      close: () => this.kernel(h.rel, () => view.release(h)),
    };
  }

  /**
   * The kernel's path walk: each component looked up, symbolic links followed (the last one only when
   * `follow`), ENOTDIR through a file. Returns the path relative to the view; its last name may not exist.
   */
  private async walk(p: string, follow: boolean): Promise<string> {
    if (Buffer.byteLength(p) >= PATH_MAX) throw errno('ENAMETOOLONG', p.slice(0, 80));
    if (p !== IN_PROCESS_ROOT && !p.startsWith(`${IN_PROCESS_ROOT}/`)) throw new Error(`${p} is not a path of the view (${IN_PROCESS_ROOT}/...)`);
    const todo = p.slice(IN_PROCESS_ROOT.length).split('/');
    const done: string[] = [];
    let links = 0;
    while (todo.length > 0) {
      const name = todo.shift()!;
      if (name === '' || name === '.') continue;
      if (name === '..') {
        done.pop();
        continue;
      }
      const rel = join(done.join('/'), name);
      const last = !todo.some((n) => n !== '' && n !== '.');
      if (last && !follow) {
        done.push(name);
        break;
      }
      const a = await this.attr(rel);
      if (!a) {
        if (last) {
          done.push(name);
          break;
        }
        throw errno('ENOENT', p);
      }
      if (kind(a) === S_IFLNK) {
        if (++links > 40) throw errno('ELOOP', p);
        const target = await this.view.readlink(rel);
        if (target.startsWith('/')) throw new Error(`${p}: a symbolic link out of the view (${target}): no case makes one`);
        todo.unshift(...target.split('/'));
        continue;
      }
      if (!last && kind(a) !== S_IFDIR) throw errno('ENOTDIR', p);
      done.push(name);
    }
    return done.join('/');
  }

  /** A lookup: the attributes, or null when the name is not there. */
  private async attr(rel: string): Promise<Attr | null> {
    try {
      return await this.view.getattr(rel);
    } catch (e) {
      if ((e as { code?: string }).code === 'ENOENT') return null;
      throw e;
    }
  }

  /** One errno for every failure, as fuse-ops answers: what is not an errno (a bug) becomes EIO and keeps its message. */
  private async kernel<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) throw e;
      throw Object.assign(new Error(`EIO: ${what}: ${(e as Error).message}`), { code: 'EIO', cause: e });
    }
  }
}

/** A case in process: a tool or another process needs a real path, which a view called directly has not. */
export function inProcessPlace(sys: ViewSys): Place {
  return {
    tool: (cmd) => Promise.reject(new NeedsMount(`${cmd} is a real tool: it needs a path, and a view called directly has none (declare the case mountOnly)`)),
    as: (uid, gid) => sys.as(uid, gid),
    // No kernel between the case and the view: nothing is cached.
    dropCaches: async () => undefined,
  };
}

/**
 * A branch view opened without a mount, as nasd opens one: a Store (bare repository) whose branch `posix`
 * holds the default template (its .gitignore included), the default rules, workspace/ as scratch, and
 * the commit window the test daemons use. Nothing here is mounted; close() commits, closes and removes it all.
 */
export async function openInProcessView(): Promise<{ view: BranchView; close(): Promise<void> }> {
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-posix-view-'));
  try {
    const work = `${tmp}/template`;
    for (const f of defaultTemplate('demo', 'owner', new Date())) {
      await fs.mkdir(path.dirname(`${work}/${f.path}`), { recursive: true });
      if (f.kind === 'symlink') await fs.symlink(f.content.toString(), `${work}/${f.path}`);
      else await fs.writeFile(`${work}/${f.path}`, f.content, { mode: f.kind === 'exec' ? 0o755 : 0o644 });
    }
    const git = async (...args: string[]) => {
      const r = await run('git', ['-c', 'user.name=op', '-c', 'user.email=op@x', ...args]);
      if (r.code !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    };
    await git('-C', work, 'init', '-q');
    await git('-C', work, 'add', '-A');
    await git('-C', work, 'commit', '-qm', 'template');
    await git('clone', '-q', '--bare', work, `${tmp}/demo.git`);
    await git(`--git-dir=${tmp}/demo.git`, 'update-ref', 'refs/heads/posix', 'HEAD');
    const store = await Store.open(`${tmp}/demo.git`);
    const identity = { name: 'nasd', email: 'nasd@localhost' };
    const view = await BranchView.open(
      {
        role: 'demo', branch: 'posix', store, trash: new Trash(store, identity), identity, owner: { uid: 0, gid: 0 },
        rules: compileRules(), quotaBytes: 2 * 1024 ** 3, dir: `${tmp}/branches/posix`, windowMs: 50, log: pino({ level: 'silent' }),
      },
      ['workspace'],
    );
    return {
      view,
      close: async () => {
        try {
          await view.close();
        } finally {
          await removeTree(tmp);
        }
      },
    };
  } catch (err) {
    await removeTree(tmp);
    throw err;
  }
}
