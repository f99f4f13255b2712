import fs from 'node:fs/promises';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import { hasCode, UserError } from '../util/errors.js';

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

/** The owner credential, created on first start. */
export async function loadOwnerToken(stateDir: string): Promise<string> {
  const file = ownerTokenPath(stateDir);
  try {
    const token = (await fs.readFile(file, 'utf8')).trim();
    if (token.length >= 32) return token;
  } catch (e) {
    if (!hasCode(e, 'ENOENT')) throw e;
  }
  const token = randomBytes(32).toString('base64url');
  await fs.writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}

export function credentialsOf(req: http.IncomingMessage, ownerToken: string): Credentials {
  const header = (name: string) => {
    const v = req.headers[name];
    return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
  };
  const owner = header('x-nas-owner');
  const a = Buffer.from(owner ?? '');
  const b = Buffer.from(ownerToken);
  return { owner: a.length === b.length && timingSafeEqual(a, b), lease: header('x-nas-lease') };
}

/** Owner actions: approve, reject, review a note, issue a top-level lease, revoke, discard another's branch. */
export function requireOwner(creds: Credentials, action: string, stateDir: string): void {
  if (creds.owner) return;
  throw new UserError(
    `${action} is an owner action: it needs the owner credential (${ownerTokenPath(stateDir)}, which nas reads when run as root, ` +
      'or $NAS_OWNER_TOKEN). No lease carries it. Nothing was changed',
    403,
  );
}
