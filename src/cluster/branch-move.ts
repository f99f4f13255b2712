import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import type { ServerRepo } from '../store/store.js';
import type { Asking } from './asking.js';
import type { BranchNames } from './branch-names.js';
import type { ClusterEtcd } from './etcd.js';
import type { HostRecord } from './hosts.js';
import { hostBranchRef, proposalId } from './proposal.js';

/**
 * `nas branch move <role>@<branch> --to <host>`: a branch goes to another host. The host that holds it closes
 * it (what is pending is committed), pushes its head and hands the name over in etcd (`homes/<role>/moves/<id>`
 * from `asked` to `handed`, with the name's claim in the same transaction); the new host makes the branch at
 * that head and answers. With --force, when the holder is down, the new host takes the head the holder last
 * pushed: what the holder had not pushed is kept there as `<branch>-left-<holder>` once it is back (reclaim).
 */

/** What the workflows do for a move (workflows/branches.ts). */
export interface BranchHost {
  handOver(role: string, branch: string, push: (head: string) => Promise<void>): Promise<{ head: string; ttl: string }>;
  takeOver(role: string, branch: string, head: string, ttl: string): Promise<void>;
  /** A copy another host took by force: it goes, and what it held beyond `pushed` is kept as `keepAs` (the name, or null). */
  leftBehind(role: string, branch: string, pushed: string | undefined, keepAs: string): Promise<string | null>;
}

interface Move {
  id: string;
  branch: string;
  from: string;
  to: string;
  state: 'asked' | 'handed';
  head?: string;
  ttl?: string;
}

export class BranchMoves {
  host!: BranchHost;

  constructor(
    private readonly etcd: ClusterEtcd,
    private readonly me: string,
    private readonly names: BranchNames,
    private readonly asking: Asking,
    private readonly live: () => Promise<Map<string, HostRecord>>,
    private readonly server: (role: string) => ServerRepo,
    /** This host's pushes of its branches to a Home's repository, one at a time (two pushes creating one ref race). */
    private readonly pushing: <T>(role: string, fn: () => Promise<T>) => Promise<T>,
    private readonly log: Logger,
  ) {}

  async move(role: string, branch: string, to: string, force: boolean): Promise<{ branch: string; from: string; to: string; head: string }> {
    const from = await this.names.owner(role, branch);
    if (!from) throw new UserError(`no host holds a branch ${role}@${branch} (see nas branch list on each host)`, 404);
    if (from === to) throw new UserError(`${role}@${branch} is on host ${to} already`, 409);
    const hosts = await this.live();
    const target = hosts.get(to);
    if (!target || !(target.homes === 'all' || target.homes.includes(role))) throw new UserError(`host ${to} is not up or does not serve Home ${role}: see nas cluster status`, 409);
    const id = proposalId(this.me);
    let move: Move = { id, branch, from, to, state: 'asked' };
    if (!hosts.has(from)) {
      const head = (await this.server(role).refs(hostBranchRef(from, branch))).get(hostBranchRef(from, branch));
      if (!force || !head) {
        throw new UserError(`host ${from}, which holds ${role}@${branch}, is not up. ` + (head
          ? `nas branch move ${role}@${branch} --to ${to} --force takes the head it last pushed (${head.slice(0, 12)}); what it did not push is kept there, as ${role}@${branch}-left-${from}, once it is back`
          : 'It never pushed the branch, so there is nothing to move'), 409);
      }
      // The holder is down: the name goes over here, with the head it last pushed.
      move = { ...move, state: 'handed', head, ttl: '48h' };
      const claim = `homes/${role}/branches/${branch}`;
      const res = await this.etcd.kv.if(claim, 'Value', '!=', '').then(
        this.etcd.kv.put(claim).value(JSON.stringify({ host: to, at: new Date().toISOString() })),
        this.etcd.kv.put(`homes/${role}/moves/${id}`).value(JSON.stringify(move)),
      ).commit();
      if (!res.succeeded) throw new UserError(`${role}@${branch} changed hands meanwhile: try again`, 409);
      return this.answer(role, id, move);
    }
    return this.answer(role, id, move, `moves/${id}`);
  }

  private async answer(role: string, id: string, move: Move, key?: string): Promise<{ branch: string; from: string; to: string; head: string }> {
    const r = key ? await this.asking.ask(role, key, id, move) : await this.asking.wait(role, id);
    if (r.error) throw new UserError(r.error, r.status ?? 409);
    return { branch: move.branch, from: move.from, to: move.to, head: r.main };
  }

  /** A move key the watch saw: the holder hands over, the new host takes over. */
  async onEvent(role: string, value: string): Promise<void> {
    let move: Move;
    try {
      move = JSON.parse(value) as Move;
    } catch {
      return;
    }
    if (!move.id || !move.branch) return;
    try {
      if (move.state === 'asked' && move.from === this.me) await this.handOut(role, move);
      else if (move.state === 'handed' && move.to === this.me) await this.takeIn(role, move);
    } catch (err) {
      this.log.error({ err, role, branch: move.branch, to: move.to }, 'cluster: branch move failed');
      await this.finish(role, move, { error: `moving ${role}@${move.branch} to ${move.to} failed: ${(err as Error).message}`, status: 500 });
    }
  }

  /**
   * After this host was away: a branch here whose name another host holds now was moved by force (`--force` while
   * this host was down or cut off), and its copy here goes; what it held beyond what this host last pushed
   * (`pushed`) is kept as a branch of its own, `<branch>-left-<host>`. A branch here whose name no host holds (a
   * run's, made while etcd was out of reach, or one from before the cluster) is claimed.
   */
  async reclaim(role: string, local: string[], pushed: (branch: string) => string | undefined): Promise<void> {
    if (local.length === 0) return;
    const prefix = `homes/${role}/branches/`;
    const claims = new Map((await this.etcd.list<{ host: string }>(prefix)).map((c) => [c.key.slice(prefix.length), c.value.host]));
    for (const branch of local) {
      const holder = claims.get(branch);
      if (holder === this.me) continue;
      if (!holder) {
        await this.names.claim(role, branch, { random: true }).catch(() => undefined);
        continue;
      }
      const kept = await this.host.leftBehind(role, branch, pushed(branch), `${branch}-left-${this.me}`);
      this.log.warn({ role, branch, holder, kept }, `cluster: ${role}@${branch} was moved to host ${holder} while this host was away: its copy here is gone` +
        (kept ? `; what it held that was never pushed is kept as ${role}@${kept}` : ' (it held nothing that was not pushed)'));
    }
  }

  private async handOut(role: string, move: Move): Promise<void> {
    const claim = `homes/${role}/branches/${move.branch}`;
    const { head, ttl } = await this.host.handOver(role, move.branch, async (h) => {
      await this.pushing(role, () => this.server(role).push([{ from: h, to: hostBranchRef(this.me, move.branch), expected: 'any' }]));
    });
    const handed: Move = { ...move, state: 'handed', head, ttl };
    await this.etcd.kv.if(claim, 'Value', '!=', '').then(
      this.etcd.kv.put(claim).value(JSON.stringify({ host: move.to, at: new Date().toISOString() })),
      this.etcd.kv.put(`homes/${role}/moves/${move.id}`).value(JSON.stringify(handed)),
    ).commit();
    this.log.info({ role, branch: move.branch, to: move.to, head }, 'cluster: branch handed over');
  }

  private async takeIn(role: string, move: Move): Promise<void> {
    await this.server(role).fetchCommits([move.head!]).catch(() => this.server(role).fetch([[hostBranchRef(move.from, move.branch), `refs/nas/elsewhere/${move.from}/${move.branch}`]]));
    await this.host.takeOver(role, move.branch, move.head!, move.ttl ?? '48h');
    this.log.info({ role, branch: move.branch, from: move.from, head: move.head }, 'cluster: branch taken over');
    await this.finish(role, move, {});
  }

  private async finish(role: string, move: Move, r: { error?: string; status?: number }): Promise<void> {
    await this.etcd.kv.if(`homes/${role}/moves/${move.id}`, 'Version', '>', 0).then(
      this.etcd.kv.delete().key(`homes/${role}/moves/${move.id}`),
      this.etcd.kv.put(`homes/${role}/results/${move.id}`).value(JSON.stringify({ id: move.id, main: move.head ?? '', ...r })),
    ).commit();
  }
}
