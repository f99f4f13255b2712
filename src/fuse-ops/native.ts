import { addonFace } from '../util/addon.js';
import type { GrantTerms, Settled } from '../cow/view.js';
import type { Answer, Op, Request } from './protocol.js';

/** The FUSE face of our binding (native/addon.cc): a mount answers cached metadata on libfuse's threads and asks JS the rest. */
export interface FuseBinding {
  /** Mounts (or takes a kernel connection over); each request for JS comes to `dispatch`, answered once by reply. */
  mount(options: MountOptions, dispatch: (req: Request) => void, barrierDone: (id: number) => void): NativeMount;
  /** The answer to request `call`: 0 or a negative errno, and what its op's answer kind holds (protocol.ts). */
  reply(call: number, result: number, answer?: Answer<Op>): void;
  /** The supplementary groups of the process behind a request not yet answered. */
  groups(call: number): number[];
  invalidate(mount: NativeMount, roles: string[] | null, barrier: number): void;
  restrict(mount: NativeMount, pidNamespace: string, names: string[] | null): void;
  /** The top-level names whose nodes may have an access ACL (asked of JS); every other node has none. */
  share(mount: NativeMount, names: string[]): void;
  stats(mount: NativeMount): { hits: number; misses: number; nodes: number; written: number };
  /** The binding answers fh's writes itself through a duplicate of `fd`, within `terms` (write-grants.ts). */
  grant(mount: NativeMount, fh: number, fd: number, terms: GrantTerms): boolean;
  /** What was written through fh's grant since it was last settled (null: none); `revoke` ends it. */
  settle(mount: NativeMount, fh: number, revoke: boolean): Settled | null;
  unmount(mount: NativeMount): Promise<void>;
  fd(mount: NativeMount): number;
  /** Stop reading requests and wait until every request read was answered: what a successor takes over with. */
  suspend(mount: NativeMount): Promise<Connection & { drained: boolean }>;
}

/**
 * What a successor needs to take a kernel connection over: the kernel's INIT as read, and the node table as the
 * binding wrote it (node ids up to 2^64 never pass through a JS number).
 */
export interface Connection {
  init: Buffer;
  nodes: Buffer;
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
  nodes?: Buffer | LegacyNodes;
}

/** The node table as a nasd before 2026-12 handed it on: id, lookup count, name count, then parent and name per name. */
export type LegacyNodes = ReadonlyArray<string | number>;

/** An opaque mount handle. */
export type NativeMount = { readonly __brand: 'NativeMount' };

let face: FuseBinding | undefined;

/** The binding, or an instruction when it was not built or libfuse 3 is missing. */
export function fuseBinding(): FuseBinding {
  face ??= addonFace<FuseBinding>(['mount', 'reply', 'groups', 'invalidate', 'restrict', 'share', 'stats', 'unmount', 'fd', 'suspend', 'grant', 'settle']);
  return face;
}
