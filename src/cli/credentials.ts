import { readFileSync } from 'node:fs';

export const DEFAULT_OWNER_TOKEN_FILE = '/var/lib/agent-nas/owner.token';

/**
 * Credentials sent with every request: the lease in $NAS_LEASE, and the owner's token from $NAS_OWNER_TOKEN
 * or the file nasd keeps it in ($NAS_OWNER_TOKEN_FILE, default /var/lib/agent-nas/owner.token: root only).
 */
export function credentialHeaders(): Record<string, string> {
  const headers: Record<string, string> = {};
  if (process.env.NAS_LEASE) headers['x-nas-lease'] = process.env.NAS_LEASE.trim();
  let owner = process.env.NAS_OWNER_TOKEN;
  if (!owner) {
    try {
      owner = readFileSync(process.env.NAS_OWNER_TOKEN_FILE || DEFAULT_OWNER_TOKEN_FILE, 'utf8').trim();
    } catch {
      // Not the owner (or not on the NAS): lease-only and open commands still work.
    }
  }
  if (owner) headers['x-nas-owner'] = owner;
  return headers;
}
