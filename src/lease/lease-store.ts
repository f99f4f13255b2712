import type { Identity, Store } from '../store/store.js';
import { LEASES_REF } from '../store/refs.js';
import { YamlRecords } from '../store/yaml-records.js';
import { checkNarrowing, LeaseRefused, newToken, parseToken, tokenMatches, validateScopes, type Lease, type LeaseRequest } from './lease.js';

/** A Home's leases, plain YAML in its Store under refs/nas/leases (`<id>.yaml`); tokens are never stored. */

export class LeaseStore {
  private readonly records: YamlRecords<Lease>;

  constructor(store: Store, identity: Identity) {
    this.records = new YamlRecords(store, LEASES_REF, identity);
  }

  async list(): Promise<Lease[]> {
    return (await this.records.list()).sort((a, b) => (a.created < b.created ? -1 : 1));
  }

  get(id: string): Promise<Lease | undefined> {
    return this.records.get(id);
  }

  /** The lease and its parents, child first. */
  async chain(lease: Lease): Promise<Lease[]> {
    const out = [lease];
    for (let l = lease; l.parent; ) {
      const parent = await this.get(l.parent);
      if (!parent) throw new LeaseRefused(`lease ${lease.id} names a parent ${l.parent} that does not exist`);
      out.push((l = parent));
    }
    return out;
  }

  /** The lease a token stands for (its hash must match), or a refusal that says why not. */
  async fromToken(token: string): Promise<Lease> {
    const parsed = parseToken(token);
    if (!parsed) throw new LeaseRefused('NAS_LEASE is not a lease token (nas1.<id>.<secret>): copy it from nas lease issue');
    const lease = await this.get(parsed.id);
    if (!lease || !tokenMatches(lease, parsed.secret)) throw new LeaseRefused(`no lease matches this token (id ${parsed.id}) in this Home`);
    return lease;
  }

  /** Store a new lease (narrowing `parent` when given) and return it with its token, shown once. */
  async issue(req: LeaseRequest, parent?: Lease): Promise<{ lease: Lease; token: string }> {
    req.scopes = validateScopes(req.scopes);
    if (parent) checkNarrowing(parent, req);
    const { id, token, sha256 } = newToken();
    const lease: Lease = {
      id, home: req.home, branch: req.branch, principal: req.principal, scopes: req.scopes,
      created: new Date().toISOString(), expires: req.expires.toISOString(), token_sha256: sha256,
      ...(req.budgetBytes !== undefined ? { budget_bytes: req.budgetBytes } : {}),
      ...(parent ? { parent: parent.id } : {}),
    };
    await this.write(lease, `lease ${id}: ${lease.principal} on ${lease.branch} (${lease.scopes.join(', ')})`);
    return { lease, token };
  }

  async revoke(id: string): Promise<Lease> {
    const lease = await this.get(id);
    if (!lease) throw new LeaseRefused(`no lease ${id} in this Home; see nas lease list`);
    if (!lease.revoked) {
      lease.revoked = new Date().toISOString();
      await this.write(lease, `revoke lease ${id}`);
    }
    return lease;
  }

  private write(lease: Lease, message: string): Promise<void> {
    return this.records.put(lease.id, lease, message);
  }
}
