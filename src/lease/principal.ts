import { lookupAccount } from '../util/accounts.js';
import type { Owner } from '../util/owner.js';

/**
 * The local account a lease's principal stands for: a user name from /etc/passwd, or a numeric uid. The
 * branch view's files are reported as owned by it, so the kernel's permission check lets only that account
 * (and root) write. A principal that is no local account names a person, not a uid: the view keeps its owner.
 */
export async function resolvePrincipal(principal: string): Promise<Owner | null> {
  if (/^\d+$/.test(principal)) return { uid: Number(principal), gid: Number(principal) };
  const account = await lookupAccount(principal);
  return account && { uid: account.uid, gid: account.gid };
}
