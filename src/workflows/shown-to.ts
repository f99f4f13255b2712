import type { Credentials } from '../api/credentials.js';
import type { Lease } from '../lease/lease.js';

/**
 * Whose leases and runs a caller is shown (nas lease list, nas run list): the owner every one; a run its own
 * (its branch, its user); a lease holder those of its branch and principal (its lease, its parents, its
 * sub-leases); anyone else none. Principals, branches, commands and intents tell what others are doing, and
 * nasd cannot put a uid to a bare member of the socket's group.
 */
export type Shown = 'all' | 'none' | { branch: string; principal: string };

export async function shownTo(
  role: string, creds: Credentials, leases: { inForce(role: string, token: string): Promise<Lease | null> },
): Promise<Shown> {
  if (creds.owner) return 'all';
  if (creds.run) return creds.run.role === role ? { branch: creds.run.branch, principal: creds.run.user } : 'none';
  const lease = creds.lease ? await leases.inForce(role, creds.lease) : null;
  return lease ? { branch: lease.branch, principal: lease.principal } : 'none';
}
