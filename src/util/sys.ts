import { addonFace } from './addon.js';

/** The system calls Node lacks, from our binding (native/system.cc). */
export interface SystemCalls {
  /** Directory rel below directory root, by one openat2 that follows no link and cannot leave root (throws like fs). */
  openBeneath(root: string, rel: string): number;
  /** A process's PID namespace (`pid:[…]`) and each one above it up to nasd's own, innermost first; [] when it is gone. */
  pidNamespaces(pid: number): string[];
  /** This process becomes `file` (argv, env), with descriptor `fd` as 3; returns only on failure: -errno. */
  exec(file: string, argv: string[], env: string[], fd: number): number;
  /** sd_notify: `state` to systemd's notify socket, with a descriptor for its store when fd >= 0; 0 or -errno. */
  notify(socket: string, state: string, fd: number): number;
  lutimens(path: string, atime: bigint | 'now' | 'omit', mtime: bigint | 'now' | 'omit'): void;
  /** This process adopts its orphaned descendants (PR_SET_CHILD_SUBREAPER), as init would. */
  becomeSubreaper(): void;
  /** waitpid(-1): a child that ended, 0 when none has (block false), -1 when none is left. Not beside Node's own waits. */
  reapChild(block: boolean): number;
}

let calls: SystemCalls | undefined;

export function sys(): SystemCalls {
  calls ??= addonFace<SystemCalls>(['openBeneath', 'pidNamespaces', 'exec', 'notify', 'lutimens', 'becomeSubreaper', 'reapChild']);
  return calls;
}
