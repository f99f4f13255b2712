import fs from 'node:fs/promises';
import path from 'node:path';
import { constants } from 'node:fs';
import { fchmod, fchown } from '../fsx.js';
import type { Owner } from '../../util/owner.js';

/** The ids this daemon makes files with: what it makes for someone else needs a chown, nothing else does. */
const S_ISGID = 0o2000;
const SELF: Owner = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
const isSelf = (o: Owner) => o.uid === SELF.uid && o.gid === SELF.gid;

/**
 * Give what a caller just made (in the upper directory) to the caller, as a disk would: its uid, and its
 * gid unless the directory is setgid (the disk already gave the directory's group then).
 */
export async function giveToCaller(file: string, caller: Owner | null | undefined): Promise<void> {
  if (!caller || isSelf(caller)) return;
  const parent = await fs.stat(path.dirname(file));
  await fs.lchown(file, caller.uid, parent.mode & S_ISGID ? -1 : caller.gid);
}

/**
 * A file just made (its descriptor) for the caller: owner as giveToCaller gives it, then the exact mode, all
 * through the descriptor, so no name is looked up again (a link swapped in meanwhile gets nothing).
 */
export async function ownNewFile(fd: number, dir: string, caller: Owner | null | undefined, mode: number): Promise<void> {
  if (caller && !isSelf(caller)) {
    const parent = await fs.stat(dir);
    await fchown(fd, caller.uid, parent.mode & S_ISGID ? -1 : caller.gid);
  }
  // Owner first: a chown clears setuid and setgid bits, so the mode is set after it (and the daemon's umask
  // takes nothing away: the kernel applied the caller's).
  if (caller && !isSelf(caller) ? true : (mode & UMASK) !== 0) await fchmod(fd, mode & 0o7777);
}

/** The daemon's own umask, read once (setting it is the only way to read it). */
const UMASK = (() => {
  const mask = process.umask(0o022);
  process.umask(mask);
  return mask;
})();

/**
 * The kernel has already applied the caller's umask to `mode`; the daemon's umask must not take more away
 * (a directory made 0777 is 0777, as on a disk).
 */
export async function exactMode(file: string, mode: number): Promise<void> {
  if (!(mode & UMASK)) return;
  // Through a descriptor that never follows a symlink swapped in meanwhile; a directory keeps the setgid bit
  // its parent gave it (the kernel's mode never carries it).
  const fh = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (!fh) return;
  try {
    const st = await fh.stat();
    await fh.chmod((mode & 0o7777) | (st.isDirectory() ? st.mode & S_ISGID : 0));
  } finally {
    await fh.close();
  }
}

/** Give what the daemon made on a view's behalf (a copy-up, a materialised directory) to the Home's owner. */
export async function giveToOwner(file: string, owner: Owner): Promise<void> {
  if (!isSelf(owner)) await fs.lchown(file, owner.uid, owner.gid);
}
