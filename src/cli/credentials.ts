import { readFileSync } from 'node:fs';
import { ApiError } from '../api/client.js';

export const DEFAULT_OWNER_TOKEN_FILE = '/var/lib/agent-nas/owner.token';

/**
 * Credentials sent with every request: the lease in $NAS_LEASE, and the owner's token from $NAS_OWNER_TOKEN
 * or the file nasd keeps it in ($NAS_OWNER_TOKEN_FILE, default /var/lib/agent-nas/owner.token: root only).
 */
export function credentialHeaders(): Record<string, string> {
  const headers: Record<string, string> = {};
  if (process.env.NAS_LEASE) headers['x-nas-lease'] = process.env.NAS_LEASE.trim();
  const owner = process.env.NAS_OWNER_TOKEN || readToken(ownerTokenFile());
  if (owner) headers['x-nas-owner'] = owner;
  return headers;
}

/** Where the owner token is read from when $NAS_OWNER_TOKEN is not set. */
export const ownerTokenFile = (): string => process.env.NAS_OWNER_TOKEN_FILE || DEFAULT_OWNER_TOKEN_FILE;

/** Whether the caller named the owner credential itself (then nas never looks for another). */
export const ownerTokenNamed = (): boolean => Boolean(process.env.NAS_OWNER_TOKEN || process.env.NAS_OWNER_TOKEN_FILE);

/**
 * Whether the owner credential would have let the request through, as the contract's refusals say
 * (api/contract.ts, Access): 403 naming an owner action, or 401, a request that carried neither a lease nor the
 * owner's token where either would do (a propose, a checkpoint of a branch, a write into one). Either refusal
 * comes before anything changed, so the request may be sent again with the token.
 */
export function ownerWouldDo(e: unknown): boolean {
  return e instanceof ApiError && (e.status === 401 || (e.status === 403 && /owner action/.test(e.message)));
}

/** A token file's content, or undefined when it cannot be read (not the owner, or not on the NAS). */
export function readToken(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
