/** A local account as the kernel sees it: who owns a file, who a lease's principal is. */
export interface Owner {
  uid: number;
  gid: number;
}

/** The process behind a filesystem request, as the kernel reports it to the daemon. */
export interface Caller extends Owner {
  pid: number;
  /** The caller's umask, and its supplementary groups (read from /proc when asked), when the kernel said. */
  umask?: number;
  groups?: () => number[];
}
