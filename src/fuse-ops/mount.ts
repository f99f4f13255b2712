import fs from 'node:fs/promises';
import { constants } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import type { Caller } from '../util/owner.js';

const run = promisify(execFile);
const require = createRequire(import.meta.url);

/** How long the kernel may cache names and attributes: short, because merges and restores change views underneath. */
const CACHE_SECONDS = 1;

/**
 * After this long, nothing the kernel cached of a view before nasd changed it on its own is used any more (the
 * binding cannot invalidate): a stale size would cut a read of a file that grew. A change a caller waits for
 * (nas branch update) answers no sooner.
 */
export const KERNEL_CACHE_MS = CACHE_SECONDS * 1000;

export interface FuseMount {
  unmount(): Promise<void>;
  /** Who made the request being handled (valid synchronously at the start of a handler only). */
  context(): Caller | null;
}

/** Check what FUSE needs before trying, so a missing piece is named with what to install or do. */
export async function preflight(mountpoint: string, log: Logger): Promise<void> {
  try {
    await fs.access('/dev/fuse', constants.R_OK | constants.W_OK);
  } catch {
    throw new UserError(
      '/dev/fuse is missing or not accessible: load the module (modprobe fuse) or, in a container, pass --device /dev/fuse --cap-add SYS_ADMIN',
    );
  }
  try {
    await run('fusermount', ['-V']);
  } catch {
    throw new UserError('fusermount is not installed: apt-get install fuse3');
  }
  const existing = (await mountsAt(mountpoint))[0];
  if (existing) {
    if (existing.startsWith('fuse') && (await isStale(mountpoint))) {
      log.warn({ mountpoint }, 'found a stale FUSE mount (a crashed nasd?); unmounting it');
      await run('fusermount', ['-uz', mountpoint]);
    } else {
      throw new UserError(
        `mount point ${mountpoint} is busy: a ${existing} filesystem is mounted there (another nasd?). Stop it, or unmount with: fusermount -u ${mountpoint}, or choose another --mount`,
      );
    }
  }
  await fs.mkdir(mountpoint, { recursive: true });
  const entries = await fs.readdir(mountpoint);
  if (entries.length > 0) {
    throw new UserError(`mount point ${mountpoint} is not empty (${entries.slice(0, 3).join(', ')}...): nasd will not hide files; move them or choose another --mount`);
  }
}

/** Filesystem types mounted exactly at path, from /proc/self/mountinfo. */
async function mountsAt(path: string): Promise<string[]> {
  const real = await fs.realpath(path).catch(() => path);
  const text = await fs.readFile('/proc/self/mountinfo', 'utf8');
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    if (dash < 0) continue;
    const target = fields[4]?.replace(/\\040/g, ' ');
    if (target === real) out.push(fields[dash + 1]);
  }
  return out;
}

/** Whether a FUSE filesystem is still mounted at path (it is gone after an `umount` from outside). */
export async function fuseMountedAt(path: string): Promise<boolean> {
  return (await mountsAt(path)).some((type) => type.startsWith('fuse'));
}

async function isStale(path: string): Promise<boolean> {
  try {
    await fs.stat(path);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOTCONN';
  }
}

/** Load fuse-native, translating a missing libfuse into an instruction. */
function loadFuse(): any {
  try {
    return require('fuse-native');
  } catch (e) {
    const msg = (e as Error).message;
    if (/libfuse/.test(msg)) throw new UserError(`libfuse 2 is missing (${msg.split('\n')[0]}): apt-get install libfuse2`);
    throw new UserError(`cannot load fuse-native: ${msg}. Run the set-up again (scripts/setup.sh)`);
  }
}

export async function mountFuse(mountpoint: string, ops: object, log: Logger): Promise<FuseMount> {
  const Fuse = loadFuse();
  const fuse = new Fuse(mountpoint, ops, {
    allowOther: true,
    defaultPermissions: true,
    entryTimeout: CACHE_SECONDS,
    attrTimeout: CACHE_SECONDS,
    // 128 KiB writes (4 KiB ones are 16 times slower); inode numbers are the views' own (stable ones).
    bigWrites: true,
    maxWrite: 131072,
    useIno: true,
    // Always nodev and nosuid, however nasd is started (the broker adds them too): no device node or setuid file
    // a view holds acts as one. fuse-native has no option for them; its fsname is passed through verbatim, so they ride along.
    fsname: 'nasd,nodev,nosuid',
    subtype: 'nasd',
    // A safety net: a handler that never answers fails its caller with ETIMEDOUT instead of hanging it.
    // Long enough for a copy-up of a large file; fsync waits for a commit, however long the batch.
    timeout: { default: 120_000, fsync: false, fsyncdir: false },
    debug: process.env.NASD_FUSE_DEBUG === '1',
  });
  await new Promise<void>((resolve, reject) =>
    fuse.mount((err: Error | null) => (err ? reject(new UserError(`cannot mount ${mountpoint}: ${err.message}`)) : resolve())),
  );
  log.info({ mountpoint }, 'mounted');
  return {
    context: () => fuse.context(),
    unmount: () =>
      new Promise<void>((resolve) =>
        fuse.unmount((err: Error | null) => {
          if (err) log.error({ err, mountpoint }, 'unmount failed');
          resolve();
        }),
      ),
  };
}
