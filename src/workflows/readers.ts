import { lookupAccount, groupsOf } from '../util/accounts.js';
import { ANYONE, type Reader } from '../policy/policy.js';
import { resolvePrincipal } from '../lease/principal.js';
import { ReadAccess } from '../cow/read-access.js';
import type { OwnerShare } from '../cow/owner-share.js';
import type { Store } from '../store/store.js';
import type { Credentials } from '../api/credentials.js';
import type { LeaseService } from './leases.js';
import type { HomeSet } from '../homes/home-set.js';

/**
 * Who asks the control API for file content (a diff, a PR's patch, a restore), judged as the views judge the
 * processes that read through the mount: the owner credential reads everything; a run reads as its user; a
 * lease holder as its principal; anyone else (a member of the socket's group without a lease) only what
 * everyone may read. What a run or a lease holder is shown counts as read by its branch (its read manifest),
 * so a PR of a run that read the inbox this way waits for the owner as if it had read it through the mount.
 */

export interface ContentReader {
  /** null: reads everything (root, the owner). */
  reader: Reader | null;
  /** The read manifest of the caller's own branch. */
  manifest?: { record(path: string, oid: string): Promise<void> };
}

export class Readers {
  constructor(private readonly homes: HomeSet, private readonly leases: LeaseService) {}

  async of(role: string, creds: Credentials): Promise<ContentReader> {
    if (creds.owner) return { reader: null };
    const { run } = creds;
    if (run) {
      const reader = { uid: run.uid, gids: await groupsOf({ name: run.user, gid: run.gid }) };
      return { reader, manifest: run.role === role ? this.manifestOf(role, run.branch) : undefined };
    }
    const lease = creds.lease ? await this.leases.inForce(role, creds.lease) : null;
    if (!lease) return { reader: ANYONE };
    return { reader: await readerOf(lease.principal), manifest: this.manifestOf(role, lease.branch) };
  }

  /** Whether the caller could read a path of a tree through a view with this share of its owner's rights; undefined: everything. */
  mayRead(c: ContentReader, store: Store, share: OwnerShare): ((tree: string, path: string) => Promise<boolean>) | undefined {
    if (!c.reader) return undefined;
    const access = new ReadAccess(store, share, c.reader);
    return (tree, path) => access.mayRead(tree, path);
  }

  /** What the caller was shown goes into its branch's read manifest. */
  async record(c: ContentReader, shown: { path: string; oid: string }[]): Promise<void> {
    for (const s of shown) await c.manifest?.record(s.path, s.oid);
  }

  private manifestOf(role: string, branch: string): ContentReader['manifest'] {
    return this.homes.branchNames(role).includes(branch) ? this.homes.branchView(role, branch).reads : undefined;
  }
}

/** A lease's principal as a reader: a local account with its groups, a bare uid, or (no account) anyone. */
async function readerOf(principal: string): Promise<Reader> {
  const account = await lookupAccount(principal);
  if (account) return { uid: account.uid, gids: await groupsOf(account) };
  const owner = await resolvePrincipal(principal);
  return owner ? { uid: owner.uid, gids: [owner.gid] } : ANYONE;
}
