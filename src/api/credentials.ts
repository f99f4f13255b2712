import { UserError } from '../util/errors.js';

/**
 * Who is asking: the owner (the credential in `<state_dir>/owner.token`, readable by root only, which no
 * lease carries) and/or the holder of a lease token. The CLI sends them as X-Nas-Owner and X-Nas-Lease. On a
 * run's own socket, the run.
 */

export interface Credentials {
  owner: boolean;
  lease?: string;
  /** The run whose own socket carried the request (only its user and root can connect there). */
  run?: RunCaller;
}

/** A run as its socket knows it: what it may read is what its user may, and what it reads goes into its manifest. */
export interface RunCaller {
  id: string;
  role: string;
  branch: string;
  user: string;
  uid: number;
  gid: number;
}

export const ownerTokenPath = (stateDir: string) => `${stateDir}/owner.token`;

/** Owner actions: approve, reject, review a note, issue a top-level lease, revoke, discard another's branch. */
export function requireOwner(creds: Credentials, action: string, stateDir: string): void {
  if (creds.owner) return;
  throw new UserError(
    `${action} is an owner action: it needs the owner credential (${ownerTokenPath(stateDir)}, which nas reads when run as root, ` +
      'or $NAS_OWNER_TOKEN). No lease carries it. Nothing was changed',
    403,
  );
}
