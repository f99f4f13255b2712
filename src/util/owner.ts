/** A local account as the kernel sees it: who owns a file, who a lease's principal is. */
export interface Owner {
  uid: number;
  gid: number;
}
