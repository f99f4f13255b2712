import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import { parseDuration } from '../util/duration.js';
import { validateBranch } from '../util/names.js';
import { LeaseRefused, refusal, type Lease } from '../lease/lease.js';
import { resolvePrincipal } from '../lease/principal.js';
import { LEASES_REF } from '../store/refs.js';
import { LeaseStore } from '../lease/lease-store.js';
import { requireOwner, type Credentials } from '../api/credentials.js';
import type { HomeSet } from '../homes/home-set.js';
import type { BranchView } from '../cow/branch/branch-view.js';
import type { BranchAccess, LeaseIssued, LeaseView } from '../api/types.js';
import { shownTo } from './shown-to.js';

/** Leases through the control API, and their effect on branch views: owner and quota follow the write lease in force. */

export interface Authorized {
  principal: string;
  lease?: Lease;
}

const publicView = (l: Lease, now = Date.now()): LeaseView => {
  const { token_sha256: _, ...rest } = l;
  return { ...rest, status: l.revoked ? 'revoked' : Date.parse(l.expires) <= now ? 'expired' : 'active' };
};

export class LeaseService {
  /** Per Home: the leases ref last applied, and when the next active write lease expires (see applyAll). */
  private readonly applied = new Map<string, { ref: string | null; until: number }>();
  /** What each open branch view was last given (its write leases in force and their principals), see apply. */
  private readonly given = new WeakMap<BranchView, string>();

  constructor(private readonly homes: HomeSet, private readonly stateDir: string, private readonly log: Logger) {}

  /**
   * A lease for one branch. Without a lease token this is an owner action; with one, it is a sub-lease that
   * may only narrow the caller's lease.
   */
  async issue(role: string, branch: string, opts: { principal?: string; ttl?: string; scopes?: string; budget?: number }, creds: Credentials): Promise<LeaseIssued> {
    validateBranch(branch);
    this.homes.branchView(role, branch);
    const leases = this.leasesOf(role);
    let parent: Lease | undefined;
    if (creds.lease) {
      parent = await this.leaseOf(role, creds.lease);
      const chain = await leases.chain(parent);
      const why = refusal(chain, { home: role, branch: parent.branch, scope: parent.scopes[0] });
      if (why) throw new UserError(`${why}; it cannot grant a sub-lease`, 403);
    } else requireOwner(creds, 'issuing a lease', this.stateDir);
    const principal = opts.principal ?? parent?.principal;
    if (!principal || !/^[A-Za-z0-9._@-]{1,64}$/.test(principal)) throw new UserError('--principal must name who the lease is for (a user name or uid: letters, digits, . _ @ -)');
    if (opts.budget !== undefined && !(Number.isSafeInteger(opts.budget) && opts.budget >= 0)) {
      throw new UserError('--budget must be a whole number of bytes (0 or more)');
    }
    let expires: Date;
    try {
      // A sub-lease without --ttl ends exactly with its parent.
      expires = opts.ttl || !parent ? new Date(Date.now() + parseDuration(opts.ttl ?? '2h') * 1000) : new Date(parent.expires);
    } catch (e) {
      throw new UserError((e as Error).message);
    }
    const scopes = (opts.scopes ?? parent?.scopes.join(',') ?? 'write,propose:main').split(',').map((s) => s.trim()).filter(Boolean);
    try {
      const { lease, token } = await leases.issue(
        { home: role, branch, principal, scopes, expires, budgetBytes: opts.budget ?? parent?.budget_bytes },
        parent,
      );
      this.log.info({ role, lease: lease.id, branch, principal, scopes, expires: lease.expires, parent: parent?.id ?? null }, 'lease issued');
      const access = await this.apply(role);
      return { lease: publicView(lease), token, access: access[branch] };
    } catch (e) {
      if (e instanceof LeaseRefused) throw new UserError(`${e.message}; nothing was issued`, 403);
      throw e;
    }
  }

  private leasesOf(role: string): LeaseStore {
    const home = this.homes.homeOf(role);
    return new LeaseStore(home.store, home.identity);
  }

  /** The leases the caller may see (shown-to.ts): the owner every one, a lease holder or a run its own. */
  async list(role: string, creds: Credentials): Promise<LeaseView[]> {
    const shown = await shownTo(role, creds, this);
    if (shown === 'none') return [];
    const all = await this.leasesOf(role).list();
    const mine = shown === 'all' ? all : all.filter((l) => l.branch === shown.branch && l.principal === shown.principal);
    return mine.map((l) => publicView(l));
  }

  async revoke(role: string, id: string): Promise<LeaseView> {
    try {
      const lease = await this.leasesOf(role).revoke(id);
      this.log.info({ role, lease: id, branch: lease.branch }, 'lease revoked');
      await this.apply(role);
      return publicView(lease);
    } catch (e) {
      if (e instanceof LeaseRefused) throw new UserError(e.message, 404);
      throw e;
    }
  }

  /** Revoke every lease of a branch (it is being discarded): a token must not outlive its branch. */
  async revokeBranch(role: string, branch: string): Promise<string[]> {
    const leases = this.leasesOf(role);
    const ids = (await leases.list()).filter((l) => l.branch === branch && !l.revoked).map((l) => l.id);
    for (const id of ids) {
      await leases.revoke(id);
      this.log.info({ role, lease: id, branch }, 'lease revoked');
    }
    return ids;
  }

  /** Who may do `scope` on role/branch: a lease that grants it (checked whole, parents included), or the owner. */
  async authorize(role: string, branch: string, scope: string, creds: Credentials, action: string): Promise<Authorized> {
    if (creds.lease) {
      const lease = await this.leaseOf(role, creds.lease);
      const why = refusal(await this.leasesOf(role).chain(lease), { home: role, branch, scope });
      if (why) throw new UserError(`${action} refused: ${why}. Nothing was changed`, 403);
      return { principal: lease.principal, lease };
    }
    if (creds.owner) return { principal: (await this.homes.snapshot(role)).config.role.owner ?? 'owner' };
    throw new UserError(`${action} needs a lease that grants ${scope} on ${role}/${branch} (set NAS_LEASE to its token) or the owner credential`, 401);
  }

  /** The lease a token stands for in this Home while it is in force (its parents too), or null. */
  async inForce(role: string, token: string): Promise<Lease | null> {
    const leases = this.leasesOf(role);
    try {
      const lease = await leases.fromToken(token);
      return refusal(await leases.chain(lease), { home: role, branch: lease.branch, scope: lease.scopes[0] }) ? null : lease;
    } catch (e) {
      if (e instanceof LeaseRefused) return null;
      throw e;
    }
  }

  private async leaseOf(role: string, token: string): Promise<Lease> {
    try {
      return await this.leasesOf(role).fromToken(token);
    } catch (e) {
      if (e instanceof LeaseRefused) throw new UserError(e.message, 403);
      throw e;
    }
  }

  /**
   * Give each branch view of a Home the owner and budget of its newest active write lease (or its defaults).
   * Runs when leases change and periodically, so expiry takes effect without a request.
   */
  async apply(role: string): Promise<Record<string, BranchAccess>> {
    const now = new Date();
    const home = this.homes.homeOf(role);
    const ref = await home.store.readRef(LEASES_REF);
    const store = this.leasesOf(role);
    // Grouped once: each view looks up its own branch's write leases, not every lease of the Home.
    const writes = new Map<string, Lease[]>();
    for (const l of await store.list()) if (l.scopes.includes('write')) writes.set(l.branch, [...(writes.get(l.branch) ?? []), l]);
    let until = Infinity;
    const out: Record<string, BranchAccess> = {};
    let changed = false;
    try {
      for (const view of this.homes.branchViews(role)) {
        const branch = view.name.slice(role.length + 1);
        // Every write lease in force (a sub-lease does not end its parent's); the newest one owns the view.
        const inForce: Lease[] = [];
        for (const l of [...(writes.get(branch) ?? [])].reverse()) {
          if (!refusal(await store.chain(l), { home: role, branch, scope: 'write' }, now)) inForce.push(l);
        }
        const active = inForce[0];
        for (const l of inForce) until = Math.min(until, Date.parse(l.expires));
        const principals = await Promise.all(inForce.map(async (l) => ({ id: l.id, owner: await resolvePrincipal(l.principal) })));
        const owner = principals[0]?.owner ?? null;
        // A view is told again only when what it is given changed: one lease's change costs the same whatever
        // the number of branches (telling a view chowns its roots on disk).
        const given = JSON.stringify([active ? { owner, budget: active.budget_bytes } : null, principals]);
        if (this.given.get(view) === given) {
          out[branch] = this.accessOf(view, active, owner);
          continue;
        }
        this.given.delete(view);
        try {
          if (await view.setLease(active ? { owner, budgetBytes: active.budget_bytes } : null, principals)) changed = true;
          this.given.set(view, given);
        } catch (err) {
          // Failing half-way (giving its scratch roots to their owner), it has changed whose rights it shares.
          changed = true;
          throw err;
        }
        out[branch] = this.accessOf(view, active, owner);
      }
      this.applied.set(role, { ref, until });
    } finally {
      // Modes and ACLs the kernel holds of the Home's branches are stale (a lease that ended by itself too).
      if (changed) await this.homes.viewsChanged(role);
    }
    return out;
  }

  /** What a branch's access is now, as issue answers it. */
  private accessOf(view: BranchView, active: Lease | undefined, owner: unknown): BranchAccess {
    return {
      lease: active?.id ?? null,
      owner: view.share.owner,
      shared_with: [...view.share.sharers],
      ...(active && !owner ? { warning: `principal ${active.principal} is no local account: the kernel cannot tell its processes apart, so it shares no rights in ${view.name}` } : {}),
    };
  }

  /** The periodic pass: a Home is re-applied only when its leases changed or an active write lease expired. */
  async applyAll(): Promise<void> {
    for (const role of this.homes.roles()) {
      try {
        const seen = this.applied.get(role);
        if (seen && seen.ref === (await this.homes.homeOf(role).store.readRef(LEASES_REF)) && Date.now() < seen.until) continue;
        await this.apply(role);
      } catch (err) {
        this.log.error({ err, role }, 'cannot apply leases');
      }
    }
  }
}
