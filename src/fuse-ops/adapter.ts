import { constants as osConstants } from 'node:os';
import type { TimeArg } from '../cow/view.js';
import type { Caller } from '../util/owner.js';
import { Errno, type Ops } from './ops.js';
import { ATTR_WORDS, OP, SET, packAttr, packStatfs, type Answer, type Op, type Request } from './protocol.js';

const { ENOENT, EEXIST, EINVAL, EIO, ETIMEDOUT } = osConstants.errno;
/** Long enough for a copy-up of a large file. */
const ANSWER_WITHIN_MS = 120_000;
const RENAME_NOREPLACE = 1;

/** One handler per request kind: a kind without one does not compile. */
export type Handlers = { [K in Op]: (req: Request<K>, who: Caller) => Promise<Answer<K>> };

/** The directory a path is in ('/' for a top-level name). */
const dirOf = (path: string): string => path.slice(0, Math.max(1, path.lastIndexOf('/')));

/**
 * The attributes of the directories a change was made in, as they are after it (packed one after another; null
 * if one cannot be read): the binding keeps them, so the kernel's next look at them needs no answer from here.
 */
async function dirsAfter(ops: Ops, who: Caller, paths: string[]): Promise<Float64Array | null> {
  const dirs = new Float64Array(paths.length * ATTR_WORDS);
  const read = await Promise.all(paths.map((p, i) => ops.getattr(p, who).then((attr) => packAttr(attr, dirs, i), () => null)));
  return read.includes(null) ? null : dirs;
}

/** After a name was made: its attributes and its directory's. */
async function made(ops: Ops, path: string, who: Caller): Promise<Answer<typeof OP.MKDIR>> {
  const attr = packAttr(await ops.getattr(path, who));
  return { attr, dirs: await dirsAfter(ops, who, [dirOf(path)]) };
}

async function setattr(ops: Ops, req: Request<typeof OP.SETATTR>, who: Caller): Promise<Answer<typeof OP.SETATTR>> {
  const { path, valid, set: v, fh } = req;
  // A file unlinked while open has no path: only its size can change, through its descriptor (ftruncate).
  if (!path) {
    if (!(valid & SET.SIZE) || fh < 0) throw new Errno(-ENOENT);
    await ops.ftruncate(path, fh, v[3], who);
    return { attr: packAttr(await ops.fgetattr(fh, who)) };
  }
  const time = (set: number, now: number, at: number): TimeArg => (valid & now ? 'now' : valid & set ? { sec: v[at], nsec: v[at + 1] } : 'omit');
  if (valid & SET.MODE) await ops.chmod(path, v[0], who);
  if (valid & (SET.UID | SET.GID)) await ops.chown(path, valid & SET.UID ? v[1] : -1, valid & SET.GID ? v[2] : -1, who);
  if (valid & SET.SIZE) await (fh >= 0 ? ops.ftruncate(path, fh, v[3], who) : ops.truncate(path, v[3], who));
  if (valid & (SET.ATIME | SET.MTIME | SET.ATIME_NOW | SET.MTIME_NOW)) {
    await ops.utimens(path, time(SET.ATIME, SET.ATIME_NOW, 4), time(SET.MTIME, SET.MTIME_NOW, 6), who);
  }
  return { attr: packAttr(await ops.getattr(path, who)) };
}

/** A directory's names with each one's attributes: a name that vanished between the two is left out. */
async function opendir(ops: Ops, path: string, who: Caller): Promise<Answer<typeof OP.OPENDIR>> {
  const names = await ops.readdir(path, who);
  const base = path === '/' ? '/' : `${path}/`;
  const read = await Promise.all(names.map((name) => ops.getattr(base + name, who).then((attr) => ({ attr }), (err: unknown) => ({ err }))));
  // The binding keeps a listing and answers ENOENT for names it lacks: one it could not read is no listing.
  for (const r of read) if ('err' in r && !(r.err instanceof Errno && r.err.errno === -ENOENT)) throw r.err;
  const keep: string[] = [];
  const attrs = new Float64Array(read.length * ATTR_WORDS);
  read.forEach((r, i) => 'attr' in r && packAttr(r.attr, attrs, keep.push(names[i]) - 1));
  return { names: keep, attrs: attrs.subarray(0, keep.length * ATTR_WORDS) };
}

async function rename(ops: Ops, req: Request<typeof OP.RENAME>, who: Caller): Promise<Answer<typeof OP.RENAME>> {
  const { path: from, to, flags } = req;
  if (flags & ~RENAME_NOREPLACE) throw new Errno(-EINVAL);
  if (flags & RENAME_NOREPLACE) {
    const there = await ops.getattr(to, who).then(() => true, (err: unknown) => (err instanceof Errno && err.errno === -ENOENT ? false : Promise.reject(err)));
    if (there) throw new Errno(-EEXIST);
  }
  await ops.rename(from, to, who);
  return { dirs: await dirsAfter(ops, who, [dirOf(from), dirOf(to)]) };
}

async function create(ops: Ops, req: Request<typeof OP.CREATE>, who: Caller): Promise<Answer<typeof OP.CREATE>> {
  const fh = await ops.create(req.path, req.mode, who);
  try {
    // Answered with the new file's attributes; if they cannot be read the open handle is given back.
    const attr = packAttr(await ops.getattr(req.path, who));
    return { fh, attr, dirs: await dirsAfter(ops, who, [dirOf(req.path)]), fd: ops.descriptorOf(fh) };
  } catch (err) {
    await ops.release(req.path, fh, who).catch(() => undefined);
    throw err;
  }
}

/** A file written through this handle: its attributes as the last close leaves them, for the binding to keep. */
async function release(ops: Ops, req: Request<typeof OP.RELEASE>, who: Caller): Promise<Answer<typeof OP.RELEASE>> {
  await ops.release(req.path, req.fh, who);
  if (!req.writing || !req.path) return { attr: null };
  return { attr: await ops.getattr(req.path, who).then(packAttr, () => null) };
}

/**
 * The requests the binding sends to JS, answered from the operations on paths (ops.ts). `pageCache(path)`:
 * whether the kernel may keep a file's pages between opens (views nasd alone changes, and invalidates when it does).
 */
export function handlers(ops: Ops, pageCache: (path: string) => boolean): Handlers {
  return {
    [OP.LOOKUP]: async (req, who) => ({ attr: packAttr(await ops.getattr(req.path, who)) }),
    // A file unlinked while open has no path: its descriptor answers.
    [OP.GETATTR]: async (req, who) => ({ attr: packAttr(await (!req.path && req.fh >= 0 ? ops.fgetattr(req.fh, who) : ops.getattr(req.path, who))) }),
    [OP.SETATTR]: (req, who) => setattr(ops, req, who),
    [OP.READLINK]: async (req, who) => ({ target: await ops.readlink(req.path, who) }),
    [OP.MKNOD]: async (req, who) => {
      await ops.mknod(req.path, req.mode, req.rdev, who);
      return made(ops, req.path, who);
    },
    [OP.MKDIR]: async (req, who) => {
      await ops.mkdir(req.path, req.mode, who);
      return made(ops, req.path, who);
    },
    [OP.UNLINK]: async (req, who) => {
      await ops.unlink(req.path, who);
      return { dirs: await dirsAfter(ops, who, [dirOf(req.path)]) };
    },
    [OP.RMDIR]: async (req, who) => {
      await ops.rmdir(req.path, who);
      return { dirs: await dirsAfter(ops, who, [dirOf(req.path)]) };
    },
    [OP.SYMLINK]: async (req, who) => {
      await ops.symlink(req.target, req.path, who);
      return made(ops, req.path, who);
    },
    [OP.RENAME]: (req, who) => rename(ops, req, who),
    [OP.LINK]: async (req, who) => {
      await ops.link(req.path, req.to, who);
      return made(ops, req.to, who);
    },
    [OP.OPEN]: async (req, who) => {
      const fh = await ops.open(req.path, req.flags, who);
      return { fh, keepCache: pageCache(req.path), fd: ops.descriptorOf(fh) };
    },
    [OP.READ]: async (req, who) => ({ count: await ops.read(req.path, req.fh, req.buffer, req.offset, who) }),
    [OP.WRITE]: async (req, who) => ({ count: await ops.write(req.path, req.fh, req.buffer, req.offset, who) }),
    [OP.RELEASE]: (req, who) => release(ops, req, who),
    [OP.FSYNC]: (req, who) => ops.fsync(req.path, req.fh, who),
    [OP.OPENDIR]: (req, who) => opendir(ops, req.path, who),
    [OP.FSYNCDIR]: (req, who) => ops.fsyncdir(req.path, who),
    [OP.STATFS]: async (req, who) => ({ stats: packStatfs(await ops.statfs(req.path, who)) }),
    [OP.CREATE]: (req, who) => create(ops, req, who),
    [OP.GETXATTR]: async (req, who) => ({ bytes: await ops.getacl(req.path, who) }),
    [OP.LISTXATTR]: async (req, who) => ({ bytes: await ops.listxattr(req.path, who) }),
  };
}

/** What answers a request: the binding's reply (once per call) and the caller's groups while it is unanswered. */
export interface Replies {
  reply(call: number, result: number, answer?: Answer<Op>): void;
  groups(call: number): number[];
}

function run<K extends Op>(all: Handlers, req: Request<K>, who: Caller): Promise<Answer<K>> {
  return all[req.op](req, who);
}

/**
 * The dispatcher the binding calls with each request: its handler's answer, or its errno, goes back once. A
 * handler that never answers fails its caller with ETIMEDOUT instead of hanging it (a process waiting on FUSE
 * cannot be killed); fsync waits for a commit, however long the batch. Anything but an Errno is EIO (ops.ts logged it).
 */
export function dispatcher(all: Handlers, native: Replies): (req: Request) => void {
  /** Requests not answered yet: only theirs may still be asked for the caller's groups (the binding frees a call once answered). */
  const open = new Map<number, NodeJS.Timeout | null>();
  const reply = (call: number, result: number, answer?: Answer<Op>) => {
    if (!open.has(call)) return;
    const timer = open.get(call);
    if (timer) clearTimeout(timer);
    open.delete(call);
    native.reply(call, result, answer);
  };
  return (req) => {
    const { call } = req;
    open.set(call, req.op === OP.FSYNC || req.op === OP.FSYNCDIR ? null : setTimeout(() => reply(call, -ETIMEDOUT), ANSWER_WITHIN_MS));
    const who: Caller = { uid: req.uid, gid: req.gid, pid: req.pid, umask: req.umask, groups: () => (open.has(call) ? native.groups(call) : []) };
    run(all, req, who).then(
      (answer) => reply(call, 0, answer),
      (err: unknown) => reply(call, err instanceof Errno ? err.errno : -EIO),
    );
  };
}
