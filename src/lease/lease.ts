import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Leases: narrow, expiring grants to one run (SPEC.md, Agent Branch, requirement 2). A lease names one Home,
 * one branch, its scopes (`write` on that branch, `propose:<target>`, `egress`: effects outside the Home, such as
 * the network, for a run), an expiry and an optional byte budget. A sub-lease can only narrow its parent (egress
 * only if the parent has it). Pure rules here; storage is in lease-store.ts.
 */

export interface Lease {
  id: string;
  home: string;
  branch: string;
  principal: string;
  scopes: string[];
  created: string;
  expires: string;
  budget_bytes?: number;
  parent?: string;
  /** sha256 of the token's secret: the token itself is never stored. */
  token_sha256: string;
  revoked?: string;
}

export interface LeaseRequest {
  home: string;
  branch: string;
  principal: string;
  scopes: string[];
  expires: Date;
  budgetBytes?: number;
}

/** Refused: the message says what is wrong and what to do. */
export class LeaseRefused extends Error {}

const TARGETS = ['main'];

/** The scope that lets a run reach outside the Home (the host's network); without it a run has loopback only. */
export const EGRESS = 'egress';

export function validateScopes(scopes: string[]): string[] {
  if (scopes.length === 0) throw new LeaseRefused('a lease needs at least one scope: write, propose:main, egress');
  for (const s of scopes) {
    if (s === 'write' || s === EGRESS) continue;
    const target = /^propose:(.+)$/.exec(s)?.[1];
    if (!target) throw new LeaseRefused(`unknown scope "${s}": scopes are write, propose:<target> and egress`);
    if (!TARGETS.includes(target)) throw new LeaseRefused(`cannot propose into "${target}": the only target is main`);
  }
  return [...new Set(scopes)].sort();
}

/** A sub-lease may only narrow: same Home, branch and principal; fewer scopes; no later expiry; no bigger budget. */
export function checkNarrowing(parent: Lease, req: LeaseRequest): void {
  const problems: string[] = [];
  if (req.budgetBytes !== undefined && !(Number.isSafeInteger(req.budgetBytes) && req.budgetBytes >= 0)) problems.push('its budget is not a whole number of bytes');
  if (req.home !== parent.home || req.branch !== parent.branch) {
    problems.push(`it is for ${req.home}/${req.branch}, the parent for ${parent.home}/${parent.branch}`);
  }
  if (req.principal !== parent.principal) problems.push(`its principal ${req.principal} is not the parent's (${parent.principal})`);
  const extra = req.scopes.filter((s) => !parent.scopes.includes(s));
  if (extra.length > 0) problems.push(`it asks for ${extra.join(', ')}, which the parent does not have (${parent.scopes.join(', ')})`);
  if (req.expires.getTime() > Date.parse(parent.expires)) problems.push(`it would outlive the parent, which expires ${parent.expires}`);
  if (parent.budget_bytes !== undefined && (req.budgetBytes === undefined || req.budgetBytes > parent.budget_bytes)) {
    problems.push(`its budget must be at most the parent's ${parent.budget_bytes} bytes`);
  }
  if (problems.length > 0) throw new LeaseRefused(`a sub-lease can only narrow its parent ${parent.id}: ${problems.join('; ')}`);
}

/** Why a lease (with its chain of parents, child first) does not allow an action now, or null if it does. */
export function refusal(chain: Lease[], want: { home: string; branch: string; scope: string }, now = new Date()): string | null {
  const lease = chain[0];
  for (const l of chain) {
    if (l.revoked) return `lease ${lease.id} is revoked${l !== lease ? ` (its parent ${l.id} was revoked ${l.revoked})` : ` (${l.revoked})`}`;
    if (Date.parse(l.expires) <= now.getTime()) return `lease ${lease.id} expired at ${l.expires}${l !== lease ? ` (with its parent ${l.id})` : ''}`;
  }
  if (lease.home !== want.home) return `lease ${lease.id} is for the Home ${lease.home}, not ${want.home}`;
  if (lease.branch !== want.branch) return `lease ${lease.id} is for the branch ${lease.branch}, not ${want.branch}`;
  if (!lease.scopes.includes(want.scope)) return `lease ${lease.id} does not grant ${want.scope} (it grants ${lease.scopes.join(', ')})`;
  return null;
}

/** A new token: `nas1.<lease id>.<secret>`. Only the secret's hash is kept. */
export function newToken(): { id: string; token: string; sha256: string } {
  const id = `l-${randomBytes(6).toString('hex')}`;
  const secret = randomBytes(32).toString('base64url');
  return { id, token: `nas1.${id}.${secret}`, sha256: sha256(secret) };
}

export function parseToken(token: string): { id: string; secret: string } | null {
  const m = /^nas1\.(l-[0-9a-f]{12})\.([A-Za-z0-9_-]{43})$/.exec(token.trim());
  return m ? { id: m[1], secret: m[2] } : null;
}

export function tokenMatches(lease: Lease, secret: string): boolean {
  const a = Buffer.from(lease.token_sha256, 'hex');
  const b = Buffer.from(sha256(secret), 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
