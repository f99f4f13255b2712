import type { Logger } from 'pino';
import { BRANCH_PREFIX, MAIN_REF } from '../store/refs.js';
import type { ServerRepo, Store } from '../store/store.js';

/**
 * Branches between hosts, through the git server: each host writes its own under `refs/nas/hosts/<host>/heads/`
 * (every branch that took commits, at each reconcile pass, with `push: commit`; with `push: propose` a branch goes there when it is
 * proposed) and removes there what it no longer has; the other hosts show each such branch read-only at its
 * last pushed head (`<role>@<branch>`: writes get EROFS, and the refusal names the host that holds it).
 */

/** A branch another host holds, as the git server has it. */
export interface ElsewhereBranch {
  branch: string;
  host: string;
  commit: string;
}

const HOST_BRANCH = /^refs\/nas\/hosts\/([^/]+)\/heads\/(.+)$/;
/** Where this host keeps the other hosts' branch heads (so git gc keeps them). */
const ELSEWHERE = 'refs/nas/elsewhere/';

/** The branches a Store holds (main is not one), by name, with their heads. */
export async function localBranches(store: Store): Promise<Map<string, string>> {
  return new Map([...(await store.listRefs(BRANCH_PREFIX))].filter(([ref]) => ref !== MAIN_REF).map(([ref, oid]) => [ref.slice(BRANCH_PREFIX.length), oid]));
}

/**
 * What this host last pushed to its own refs on the git server, per Home: only it writes them, so a head it
 * pushed is there until it pushes another (a proposal of a branch the reconcile pushed already pushes nothing).
 * A listing of the server's refs that says otherwise (an operator's hand, or a push after the listing) wins.
 */
export class PushedHeads {
  private readonly heads = new Map<string, Map<string, string>>();

  has(role: string, ref: string, oid: string): boolean {
    return this.heads.get(role)?.get(ref) === oid;
  }

  pushed(role: string, updates: { from: string | null; to: string }[]): void {
    const heads = this.heads.get(role) ?? new Map<string, string>();
    this.heads.set(role, heads);
    for (const u of updates) {
      if (u.from) heads.set(u.to, u.from);
      else heads.delete(u.to);
    }
  }

  checked(role: string, refs: Map<string, string>): void {
    const heads = this.heads.get(role);
    for (const [ref, oid] of heads ?? []) if (refs.get(ref) !== oid) heads!.delete(ref);
  }
}

export class BranchSync {
  constructor(
    private readonly host: string,
    private readonly mode: 'propose' | 'commit',
    private readonly show: (role: string, branches: ElsewhereBranch[]) => Promise<void>,
    private readonly log: Logger,
    private readonly heads = new PushedHeads(),
  ) {}

  /** One Home's pass; `refs` is what the server holds now (one ls-remote). */
  async sync(role: string, store: Store, server: ServerRepo, refs: Map<string, string>): Promise<void> {
    const local = await localBranches(store);
    const mine = `refs/nas/hosts/${this.host}/heads/`;
    const updates: { from: string | null; to: string; expected: 'any' }[] = [];
    if (this.mode === 'commit') {
      for (const [branch, oid] of local) if (refs.get(mine + branch) !== oid) updates.push({ from: oid, to: mine + branch, expected: 'any' });
    }
    for (const ref of refs.keys()) if (ref.startsWith(mine) && !local.has(ref.slice(mine.length))) updates.push({ from: null, to: ref, expected: 'any' });
    this.heads.checked(role, refs);
    if (updates.length > 0) {
      await server.push(updates).then(() => this.heads.pushed(role, updates), (err) => this.log.warn({ role, err: (err as Error).message }, 'cluster: cannot push this host\'s branches; the next pass retries'));
    }

    const elsewhere: ElsewhereBranch[] = [];
    for (const [ref, commit] of refs) {
      const m = HOST_BRANCH.exec(ref);
      if (m && m[1] !== this.host && !local.has(m[2])) elsewhere.push({ branch: m[2], host: m[1], commit });
    }
    const kept = await store.listRefs(ELSEWHERE);
    const wanted = new Map(elsewhere.map((b) => [`${ELSEWHERE}${b.host}/${b.branch}`, b]));
    const missing = [...wanted].filter(([ref, b]) => kept.get(ref) !== b.commit).map(([ref, b]): [string, string] => [`refs/nas/hosts/${b.host}/heads/${b.branch}`, ref]);
    if (missing.length > 0) await server.fetch(missing);
    for (const [ref, oid] of kept) if (!wanted.has(ref)) await store.deleteRef(ref, oid).catch(() => undefined);
    await this.show(role, elsewhere);
  }
}
