import { lookupAccount } from '../util/accounts.js';
import type { Owner } from '../util/owner.js';

/**
 * The local account a lease's principal stands for: a user name from /etc/passwd, or a numeric uid. It shares
 * the rights of the Home's owner in the branch (an ACL entry the kernel checks: cow/owner-share.ts) and owns the
 * scratch roots. A principal that is no local account names a person, not a uid: it shares nothing.
 */
export async function resolvePrincipal(principal: string): Promise<Owner | null> {
  if (/^\d+$/.test(principal)) return { uid: Number(principal), gid: Number(principal) };
  const account = await lookupAccount(principal);
  return account && { uid: account.uid, gid: account.gid };
}
