import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { UserError } from './errors.js';

/** Our libfuse 3 binding (native/): a mount answers cached metadata on libfuse's threads and asks JS the rest. */
export interface NativeBinding {
  mount(options: MountOptions, dispatch: Dispatch, barrierDone: (id: number) => void): NativeMount;
  /** Directory rel below directory root, by one openat2 that follows no link and cannot leave root (throws like fs). */
  openBeneath(root: string, rel: string): number;
  /** A process's PID namespace (`pid:[…]`) and each one above it up to nasd's own, innermost first; [] when it is gone. */
  pidNamespaces(pid: number): string[];
  /** This process becomes `file` (argv, env), with descriptor `fd` as 3; returns only on failure: -errno. */
  exec(file: string, argv: string[], env: string[], fd: number): number;
  /** `fd`: an opened file's descriptor on disk, which the binding then reads through itself. */
  reply(call: number, result: number, value?: unknown, extra?: unknown, flag?: number, fd?: number): void;
  /** The supplementary groups of the process behind a request not yet answered. */
  groups(call: number): number[];
  invalidate(mount: NativeMount, roles: string[] | null, barrier: number): void;
  restrict(mount: NativeMount, pidNamespace: string, names: string[] | null): void;
  /** The top-level names whose nodes may have an access ACL (asked of JS); every other node has none. */
  share(mount: NativeMount, names: string[]): void;
  stats(mount: NativeMount): { hits: number; misses: number; nodes: number };
  unmount(mount: NativeMount): Promise<void>;
  fd(mount: NativeMount): number;
  /** Stop reading requests and wait until every request read was answered: what a successor takes over with. */
  suspend(mount: NativeMount): Promise<Connection & { drained: boolean }>;
  /** sd_notify: `state` to systemd's notify socket, with a descriptor for its store when fd >= 0; 0 or -errno. */
  notify(socket: string, state: string, fd: number): number;
  lutimens(path: string, atime: bigint | 'now' | 'omit', mtime: bigint | 'now' | 'omit'): void;
  /** This process adopts its orphaned descendants (PR_SET_CHILD_SUBREAPER), as init would. */
  becomeSubreaper(): void;
  /** waitpid(-1): a child that ended, 0 when none has (block false), -1 when none is left. Not beside Node's own waits. */
  reapChild(block: boolean): number;
}

/** What a successor needs to take a kernel connection over: the kernel's INIT as read, and the node table. */
export interface Connection {
  init: Buffer;
  nodes: unknown[];
}

export interface MountOptions {
  mountpoint: string;
  options: string;
  ttl: number;
  threads: number;
  /** The views whose nodes have ACLs from the first request on (share() changes them later). */
  shared?: string[];
  /** Tests only: every node gets a private id (from 2^62), as inode-number collisions give some in use. */
  privateIds?: boolean;
  /** Take over this kernel connection (/dev/fuse, handed on by an earlier nasd) instead of mounting. */
  fd?: number;
  init?: Buffer;
  nodes?: unknown[];
}

/** An opaque mount handle. */
export type NativeMount = { readonly __brand: 'NativeMount' };

/** dispatch(op, call, path, a, b, c, uid, gid, pid, umask): one request for JS; answered once with reply(call, ...). */
export type Dispatch = (op: number, call: number, path: string, a: any, b: any, c: any, uid: number, gid: number, pid: number, umask: number) => void;

/** native/ at the project's root: three levels up from dist/src/util, two from src/util (tests run the source). */
const here = path.dirname(fileURLToPath(import.meta.url));
const BUILT = path.resolve(here, here.split(path.sep).includes('dist') ? '../../..' : '../..', 'native/build/Release');
const ADDON = `${BUILT}/nasfuse.node`;
/** Preloaded into the next nasd of a reload: a SIGHUP before its JS listens does not end it (native/hup-guard.cc). */
export const HUP_GUARD = `${BUILT}/nas-hup-guard.node`;
let loaded: NativeBinding | undefined;

/** The binding, or an instruction when it was not built or libfuse 3 is missing. */
export function binding(): NativeBinding {
  if (loaded) return loaded;
  try {
    loaded = createRequire(import.meta.url)(ADDON) as NativeBinding;
    return loaded;
  } catch (e) {
    const msg = (e as Error).message.split('\n')[0];
    if (/libfuse3/.test(msg)) throw new UserError(`libfuse 3 is missing (${msg}): apt-get install libfuse3-3`);
    throw new UserError(`cannot load the FUSE binding (${msg}): build it with scripts/build-native.sh (run scripts/setup.sh)`);
  }
}
