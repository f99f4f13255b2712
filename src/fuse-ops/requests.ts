import { constants as osConstants } from 'node:os';
import type { Attr } from '../cow/attr.js';
import type { FsStats, TimeArg } from '../cow/view.js';
import type { Caller } from '../util/owner.js';
import type { fuseOps } from './ops.js';
import { ATTR_WORDS, OP, SET, packAttr, type Dispatch } from './native.js';

type Ops = ReturnType<typeof fuseOps>;
type Reply = (call: number, result: number, value?: unknown, extra?: unknown, flag?: number, fd?: number) => void;

const { ENOENT, EEXIST, EINVAL, ETIMEDOUT } = osConstants.errno;
/** Long enough for a copy-up of a large file. */
const ANSWER_WITHIN_MS = 120_000;
const RENAME_NOREPLACE = 1;

/**
 * The requests the binding sends to JS, as calls of the path-based handlers (ops.ts). `caller` is set while a
 * handler's synchronous start runs, where ops.ts reads who asks. `pageCache(path)`: whether the kernel may keep
 * a file's pages between opens (views nasd alone changes, and invalidates when it does).
 */
/** The directory a path is in ('/' for a top-level name). */
const dirOf = (path: string): string => path.slice(0, Math.max(1, path.lastIndexOf('/')));

export function dispatcher(ops: Ops, send: Reply, groups: (call: number) => number[], pageCache: (path: string) => boolean): { dispatch: Dispatch; caller(): Caller | null } {
  let current: Caller | null = null;
  /** Requests not answered yet: only theirs may still be asked for the caller's groups (the binding frees a call once answered). */
  const open = new Map<number, NodeJS.Timeout | null>();
  /** Each request is answered once: a second answer (a late one after the safety net) is dropped. */
  const reply: Reply = (call, ...rest) => {
    if (!open.has(call)) return;
    const timer = open.get(call);
    if (timer) clearTimeout(timer);
    open.delete(call);
    send(call, ...rest);
  };

  /** Run a handler with its caller known during its synchronous start. */
  function as<T>(who: Caller, fn: () => T): T {
    const outer = current;
    current = who;
    try {
      return fn();
    } finally {
      current = outer;
    }
  }

  /** Answer with the attributes of `path` (entries and setattr), or the error getting them. */
  function withAttr(call: number, who: Caller, path: string, result = 0): void {
    as(who, () => ops.getattr(path, (err: number, attr?: unknown) => (err ? reply(call, err) : reply(call, result, packAttr(attr as Attr)))));
  }

  /**
   * The attributes of the directories a change was made in, as they are after it (packed one after another; null
   * if one cannot be read): the binding keeps them, so the kernel's next look at them needs no answer from here.
   */
  function dirsAfter(who: Caller, paths: string[], then: (dirs: Float64Array | null) => void): void {
    const dirs = new Float64Array(paths.length * ATTR_WORDS);
    let left = paths.length;
    let failed = false;
    paths.forEach((p, i) =>
      as(who, () =>
        ops.getattr(p, (err: number, attr?: unknown) => {
          if (err) failed = true;
          else packAttr(attr as Attr, dirs, i);
          if (--left === 0) then(failed ? null : dirs);
        }),
      ),
    );
  }

  /** Then: answer with the new name's attributes and its directory's once the change succeeded. */
  const entry = (call: number, who: Caller, path: string) => (err: number) => {
    if (err) return reply(call, err);
    as(who, () =>
      ops.getattr(path, (e: number, attr?: unknown) =>
        e ? reply(call, e) : dirsAfter(who, [dirOf(path)], (dirs) => reply(call, 0, packAttr(attr as Attr), dirs))),
    );
  };
  /** Then: answer a change of names in `dirs` with their attributes after it. */
  const doneIn = (call: number, who: Caller, dirs: string[]) => (err: number) =>
    err ? reply(call, err) : dirsAfter(who, dirs, (after) => reply(call, 0, null, after));
  const done = (call: number) => (err: number) => reply(call, err || 0);

  function setattr(call: number, who: Caller, path: string, valid: number, v: Float64Array, fh: number): void {
    const time = (set: number, now: number, at: number): TimeArg => (valid & now ? 'now' : valid & set ? { sec: v[at], nsec: v[at + 1] } : 'omit');
    const steps: Array<(cb: (err: number) => void) => void> = [];
    if (valid & SET.MODE) steps.push((cb) => ops.chmod(path, v[0], cb));
    if (valid & (SET.UID | SET.GID)) steps.push((cb) => ops.chown(path, valid & SET.UID ? v[1] : -1, valid & SET.GID ? v[2] : -1, cb));
    if (valid & SET.SIZE) steps.push((cb) => (fh >= 0 ? ops.ftruncate(path, fh, v[3], cb) : ops.truncate(path, v[3], cb)));
    if (valid & (SET.ATIME | SET.MTIME | SET.ATIME_NOW | SET.MTIME_NOW)) {
      steps.push((cb) => ops.utimens(path, time(SET.ATIME, SET.ATIME_NOW, 4), time(SET.MTIME, SET.MTIME_NOW, 6), cb));
    }
    // A file unlinked while open has no path: only its size can change, through its descriptor (ftruncate).
    if (!path) {
      if (!(valid & SET.SIZE) || fh < 0) return reply(call, -ENOENT);
      return as(who, () =>
        ops.ftruncate(path, fh, v[3], (err: number) =>
          err ? reply(call, err) : ops.fgetattr(fh, (e: number, attr?: unknown) => (e ? reply(call, e) : reply(call, 0, packAttr(attr as Attr))))),
      );
    }
    const next = (i: number) => {
      if (i === steps.length) return withAttr(call, who, path);
      as(who, () => steps[i]((err) => (err ? reply(call, err) : next(i + 1))));
    };
    next(0);
  }

  function opendir(call: number, who: Caller, path: string): void {
    as(who, () =>
      ops.readdir(path, (err: number, list?: unknown) => {
        if (err) return reply(call, err);
        const names = list as string[];
        const base = path === '/' ? '/' : `${path}/`;
        const attrs = new Float64Array(names.length * ATTR_WORDS);
        const found: boolean[] = new Array(names.length).fill(false);
        let left = names.length;
        let failed = 0;
        const finish = () => {
          // The binding keeps a listing and answers ENOENT for names it lacks: one it could not read is no listing.
          if (failed) return reply(call, failed);
          // A name that vanished between the listing and its getattr is left out.
          const keep = names.filter((_, i) => found[i]);
          if (keep.length === names.length) return reply(call, 0, names, attrs);
          const packed = new Float64Array(keep.length * ATTR_WORDS);
          let j = 0;
          names.forEach((_, i) => found[i] && packed.set(attrs.subarray(i * ATTR_WORDS, (i + 1) * ATTR_WORDS), ATTR_WORDS * j++));
          reply(call, 0, keep, packed);
        };
        if (left === 0) return finish();
        as(who, () =>
          names.forEach((name, i) =>
            ops.getattr(base + name, (e: number, attr?: unknown) => {
              if (!e) {
                packAttr(attr as Attr, attrs, i);
                found[i] = true;
              } else if (e !== -ENOENT) failed = e;
              if (--left === 0) finish();
            }),
          ),
        );
      }),
    );
  }

  function rename(call: number, who: Caller, from: string, to: string, flags: number): void {
    if (flags & ~RENAME_NOREPLACE) return reply(call, -EINVAL);
    const renamed = doneIn(call, who, [dirOf(from), dirOf(to)]);
    if (!(flags & RENAME_NOREPLACE)) return as(who, () => ops.rename(from, to, renamed));
    as(who, () => ops.getattr(to, (err: number) => (err === -ENOENT ? as(who, () => ops.rename(from, to, renamed)) : reply(call, err || -EEXIST))));
  }

  const dispatch: Dispatch = (op, call, path, a, b, c, uid, gid, pid, umask) => {
    // A safety net: a handler that never answers fails its caller with ETIMEDOUT instead of hanging it (a
    // process waiting on FUSE cannot be killed). fsync waits for a commit, however long the batch.
    open.set(call, op === OP.FSYNC || op === OP.FSYNCDIR ? null : setTimeout(() => reply(call, -ETIMEDOUT), ANSWER_WITHIN_MS));
    const who: Caller = { uid, gid, pid, umask, groups: () => (open.has(call) ? groups(call) : []) };
    switch (op) {
      case OP.LOOKUP: return withAttr(call, who, path);
      case OP.GETATTR:
        // A file unlinked while open has no path: its descriptor answers.
        if (!path && a >= 0) return ops.fgetattr(a, (err: number, attr?: unknown) => (err ? reply(call, err) : reply(call, 0, packAttr(attr as Attr))));
        return withAttr(call, who, path);
      case OP.SETATTR: return setattr(call, who, path, a, b, c);
      case OP.READLINK: return as(who, () => ops.readlink(path, (err: number, target?: unknown) => reply(call, err || 0, target)));
      case OP.MKNOD: return as(who, () => ops.mknod(path, a, b, entry(call, who, path)));
      case OP.MKDIR: return as(who, () => ops.mkdir(path, a, entry(call, who, path)));
      case OP.UNLINK: return as(who, () => ops.unlink(path, doneIn(call, who, [dirOf(path)])));
      case OP.RMDIR: return as(who, () => ops.rmdir(path, doneIn(call, who, [dirOf(path)])));
      case OP.SYMLINK: return as(who, () => ops.symlink(a, path, entry(call, who, path)));
      case OP.RENAME: return rename(call, who, path, a, b);
      case OP.LINK: return as(who, () => ops.link(path, a, entry(call, who, a)));
      case OP.OPEN:
        return as(who, () =>
          ops.open(path, a, (err: number, fh?: unknown) =>
            err ? reply(call, err) : reply(call, fh as number, null, null, pageCache(path) ? 1 : 0, ops.descriptorOf(fh as number))),
        );
      case OP.CREATE:
        return as(who, () =>
          ops.create(path, a, (err: number, fh?: unknown) => {
            if (err) return reply(call, err);
            // Answered with the new file's attributes; if they cannot be read the open handle is given back.
            as(who, () =>
              ops.getattr(path, (e: number, attr?: unknown) => {
                if (!e) return dirsAfter(who, [dirOf(path)], (dirs) => reply(call, fh as number, packAttr(attr as Attr), dirs, 0, ops.descriptorOf(fh as number)));
                ops.release(path, fh as number, () => reply(call, e));
              }),
            );
          }),
        );
      case OP.READ: return ops.read(path, a, b, b.length, c, (n: number) => reply(call, n));
      case OP.WRITE: return as(who, () => ops.write(path, a, b, b.length, c, (n: number) => reply(call, n)));
      case OP.RELEASE:
        // A file written through this handle: its attributes as the last close leaves them, for the binding to keep.
        return as(who, () =>
          ops.release(path, a, (err: number) => {
            if (err || !b || !path) return reply(call, err || 0);
            as(who, () => ops.getattr(path, (e: number, attr?: unknown) => reply(call, 0, e ? null : packAttr(attr as Attr))));
          }),
        );
      case OP.FSYNC: return as(who, () => ops.fsync(path, b, a, done(call)));
      case OP.OPENDIR: return opendir(call, who, path);
      case OP.FSYNCDIR: return as(who, () => ops.fsyncdir(path, 0, 0, done(call)));
      case OP.STATFS:
        return as(who, () =>
          ops.statfs(path, (err: number, s?: unknown) => {
            if (err) return reply(call, err);
            const f = s as FsStats;
            reply(call, 0, Float64Array.of(f.bsize, f.frsize, f.blocks, f.bfree, f.bavail, f.files, f.ffree, f.favail, f.fsid, f.flag, f.namemax));
          }),
        );
      case OP.GETXATTR: return as(who, () => ops.getacl(path, (err: number, acl?: unknown) => reply(call, err || 0, acl)));
      case OP.LISTXATTR: return as(who, () => ops.listxattr(path, (err: number, names?: unknown) => reply(call, err || 0, names)));
      default: return reply(call, -osConstants.errno.ENOSYS);
    }
  };
  return { dispatch, caller: () => current };
}
