import fs from 'node:fs/promises';
import { constants } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import { fuseBinding, type Connection, type LegacyNodes, type NativeMount } from './native.js';
import { dispatcher, handlers } from './adapter.js';
import type { Ops } from './ops.js';
import { mkdirExact } from '../util/exact-mode.js';

const run = promisify(execFile);

/**
 * How long the kernel (and the binding's own cache) may keep names and attributes: hours, because nasd is the
 * only writer of every view and invalidates what it changes on its own (FuseMount.invalidate).
 */
const CACHE_SECONDS = 3600;
/** libfuse worker threads: lookups served from the cache run on them in parallel. */
const THREADS = 8;

export interface FuseMount {
  unmount(): Promise<void>;
  /**
   * Forget what the kernel and the cache hold of these Homes' views (every Home's when null) and the root's
   * listing; resolves once the kernel was told, so a command that changed a view answers after it.
   */
  invalidate(roles: string[] | null): Promise<void>;
  /** Requests from this pid namespace (a run) are served from the cache only under these names (null: lift). */
  restrict(pidNamespace: string, names: string[] | null): void;
  /** The views (top-level names) whose nodes may have an access ACL: the binding asks JS for theirs only. */
  share(names: string[]): void;
  /** Requests answered from the cache (hits) and asked of JS (misses); nodes the kernel holds; writes answered by the binding. */
  stats(): { hits: number; misses: number; nodes: number; written: number };
  /** The kernel connection's descriptor (for systemd's store). */
  fd(): number;
  /** Stop taking requests and answer every one taken: a stop that hands the connection on (FuseMount stays mounted). */
  suspend(): Promise<Connection & { drained: boolean }>;
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
  // The binding links libfuse 3: a missing library is named now, before anything is opened.
  fuseBinding();
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
  // Everyone passes through a mount point: 0755 for what nasd makes of it (its umask would keep it its own).
  await mkdirExact(mountpoint, 0o755);
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
    // A directory bound onto itself is the same directory (systemd's ReadWritePaths= makes one in nasd's
    // namespace), not something mounted there.
    if (target === real && fields[3]?.replace(/\\040/g, ' ') !== real) out.push(fields[dash + 1]);
  }
  return out;
}

/** Whether a FUSE filesystem is still mounted at path (it is gone after an `umount` from outside). */
export async function fuseMountedAt(path: string): Promise<boolean> {
  return (await mountsAt(path)).some((type) => type.startsWith('fuse'));
}

/** Whether a FUSE mount's daemon is gone: statfs always asks it (the kernel keeps the root's attributes an hour). */
async function isStale(path: string): Promise<boolean> {
  try {
    await fs.statfs(path);
    return false;
  } catch (e) {
    return e instanceof Error && 'code' in e && e.code === 'ENOTCONN';
  }
}

/** Mount options: always nodev and nosuid, however nasd is started (the broker adds them too): no device node or setuid file a view holds acts as one. */
const OPTIONS = 'allow_other,default_permissions,fsname=nasd,subtype=nasd,nodev,nosuid';

export interface MountOptions {
  /** Whether the kernel may keep a file's pages between opens (read-only views; nasd invalidates them when it changes one). */
  pageCache(path: string): boolean;
  /** A kernel connection an earlier nasd handed on (its /dev/fuse descriptor): taken over, not mounted again. */
  takeover?: { fd: number; init: Buffer; nodes: Buffer | LegacyNodes };
  /** The views whose nodes have ACLs (owner-share.ts), known before the first request is answered. */
  shared?: string[];
}

export async function mountFuse(mountpoint: string, ops: Ops, log: Logger, options: MountOptions): Promise<FuseMount> {
  const native = fuseBinding();
  const dispatch = dispatcher(handlers(ops, options.pageCache), native);
  const barriers = new Map<number, () => void>();
  let nextBarrier = 1;
  let handle: NativeMount;
  try {
    const debug = process.env.NASD_FUSE_DEBUG === '1' ? ',debug' : '';
    // Tests of the hand-over: ids above 2^53 for every node, where they come only from collisions otherwise.
    const privateIds = process.env.NASD_TEST_PRIVATE_IDS === '1';
    handle = native.mount({
      mountpoint, options: OPTIONS + debug, ttl: CACHE_SECONDS, threads: THREADS, shared: options.shared, privateIds,
      ...(options.takeover && { fd: options.takeover.fd, init: options.takeover.init, nodes: options.takeover.nodes }),
    }, dispatch, (id) => {
      barriers.get(id)?.();
      barriers.delete(id);
    });
  } catch (err) {
    throw new UserError(`cannot mount ${mountpoint}: ${err instanceof Error ? err.message : String(err)}`);
  }
  log.info({ mountpoint, takenOver: !!options.takeover }, options.takeover ? 'took the kernel connection over' : 'mounted');
  // NASD_WRITE_GRANTS=0: every write comes to JS (the bench's comparison).
  if (process.env.NASD_WRITE_GRANTS !== '0') {
    ops.useGrants({ grant: (fh, fd, terms) => native.grant(handle, fh, fd, terms), settle: (fh, revoke) => native.settle(handle, fh, revoke) });
  }
  let mounted = true;
  return {
    invalidate: (roles) =>
      new Promise<void>((resolve) => {
        if (!mounted) return resolve();
        const id = nextBarrier++;
        barriers.set(id, resolve);
        native.invalidate(handle, roles, id);
      }),
    restrict: (pidNamespace, names) => mounted && native.restrict(handle, pidNamespace, names),
    share: (names) => mounted && native.share(handle, names),
    stats: () => native.stats(handle),
    fd: () => native.fd(handle),
    suspend: () => native.suspend(handle),
    unmount: async () => {
      if (!mounted) return;
      mounted = false;
      // fusermount unmounts (under the unit it is the relay to the broker: nasd itself may not; and a connection
      // taken over has no mount libfuse knows of); libfuse then sees the connection end.
      await run('fusermount', ['-uz', mountpoint]).catch((err) => log.error({ err, mountpoint }, 'unmount failed'));
      await native.unmount(handle);
      for (const resolve of barriers.values()) resolve();
      barriers.clear();
    },
  };
}
