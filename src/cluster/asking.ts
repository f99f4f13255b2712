import type { ServerRepo, Store } from '../store/store.js';
import { MAIN_REF } from '../store/refs.js';
import { objectsSince } from './objects.js';
import { UserError } from '../util/errors.js';
import type { ClusterEtcd } from './etcd.js';
import { hostBranchRef, proposalId, shippedReads, type Proposal, type ProposalResult } from './proposal.js';
import type { Decision } from './writer.js';
import type { Outbox } from './outbox.js';
import { PushedHeads } from './branch-sync.js';

/**
 * Asking a Home's merge writer, wherever it runs: a proposal or a decision is put in etcd, and the answer comes
 * back as a result key the writer publishes with main (seen by the watch, or read if the watch missed it).
 */

/** How long a proposal or a decision waits for the writer's answer before the caller is told it is queued. */
const ANSWER_WAIT_MS = 60_000;

export class Asking {
  private readonly waiters = new Map<string, (r: ProposalResult) => void>();
  /** This host's heads on the git server as it last pushed them (branch sync's too). */
  readonly pushed = new PushedHeads();
  private readonly heads = new HeadPushes(this.pushed);

  constructor(
    private readonly etcd: ClusterEtcd,
    private readonly host: string,
    /** Bring this host's main and PR records to the server's once answered (nothing fetched if main is `main` here already). */
    private readonly follow: (role: string, main?: string) => Promise<void>,
    private readonly outbox: Outbox,
  ) {}

  /** A result key the watch saw. */
  answered(role: string, id: string, value: string): void {
    // Sent from the outbox: no one waits for it here, so its result goes, and main follows.
    if (this.outbox.sent.delete(id)) void this.etcd.kv.delete().key(`homes/${role}/results/${id}`).catch(() => undefined).then(() => this.follow(role));
    const waiter = this.waiters.get(id);
    if (!waiter) return;
    try {
      waiter(JSON.parse(value) as ProposalResult);
    } catch {
      // not readable: the read after the wait finds it, or the caller is told it is queued
    }
  }

  /**
   * Propose a branch's head: pushed to this host's prefix on the git server, queued in etcd, and answered by
   * the writer (wherever it is) with the PR it filed. Acknowledged once queued: a writer that dies after that
   * leaves it queued for the next.
   */
  async propose(role: string, server: ServerRepo, p: Omit<Proposal, 'id' | 'host' | 'at' | 'role'>, serialized: <T>(fn: () => Promise<T>) => Promise<T>, store: Store | null = null): Promise<ProposalResult> {
    try {
      await this.heads.push(role, server, { from: p.head, to: hostBranchRef(this.host, p.branch), expected: 'any' }, serialized);
    } catch (err) {
      throw new UserError(`cannot push ${role}@${p.branch} to the git server, so nothing was proposed: ${(err as Error).message}`, 502);
    }
    // What the branch adds to main as this host has it (the writer's main holds that much): sent along when small.
    const objects = store ? await objectsSince(store, [[p.head, await store.readRef(MAIN_REF)]]).catch(() => null) : null;
    const proposal: Proposal = { ...p, id: proposalId(this.host), host: this.host, role, at: new Date().toISOString(), reads: shippedReads(p.reads), ...(objects ? { objects } : {}) };
    return this.ask(role, `queue/${proposal.id}`, proposal.id, proposal, async (err) => {
      // Its head is on the git server already: it waits in the outbox and is queued once etcd answers.
      await this.outbox.keep(proposal);
      throw new UserError(`queued on this host as ${proposal.id}: etcd cannot be reached (${err.message}); the proposal goes to ` +
        `Home ${role}'s merge writer once it can, and the PR shows in nas pr list then. Nothing is lost`, 202);
    });
  }

  /** A person's decision on a PR, carried out by the Home's writer (it alone writes main and the records). */
  async decide(role: string, d: Omit<Decision, 'id' | 'host' | 'at'>): Promise<ProposalResult> {
    const decision: Decision = { ...d, id: proposalId(this.host), host: this.host, at: new Date().toISOString() };
    return this.ask(role, `decisions/${decision.id}`, decision.id, decision);
  }

  /**
   * Put `value` at `homes/<role>/<key>` and wait for the result `homes/<role>/results/<id>` (any host may answer);
   * `unreached` says what happens when etcd cannot take it (by default: nothing was queued, try again).
   */
  async ask(role: string, key: string, id: string, value: object, unreached?: (err: Error) => Promise<never>): Promise<ProposalResult> {
    return this.wait(role, id, async () => {
      try {
        await this.etcd.kv.put(`homes/${role}/${key}`).value(JSON.stringify(value));
      } catch (err) {
        if (unreached) return unreached(err as Error);
        throw new UserError(`cannot reach etcd, so nothing was queued (${(err as Error).message}): try again`, 503);
      }
    });
  }

  /** Wait for the result `homes/<role>/results/<id>` of what `start` puts in etcd. */
  async wait(role: string, id: string, start: () => Promise<void> = async () => undefined): Promise<ProposalResult> {
    const answered = new Promise<ProposalResult>((resolve) => this.waiters.set(id, resolve));
    try {
      await start();
      const queued = performance.now();
      const deadline = Date.now() + ANSWER_WAIT_MS;
      let result: ProposalResult | null = null;
      while (!result && Date.now() < deadline) {
        // The watch answers at once; the read is for an event the watch missed (a reconnect).
        result = await Promise.race([answered, new Promise<null>((r) => setTimeout(() => r(null), 2000))]);
        result ??= (await this.etcd.json<ProposalResult>(`homes/${role}/results/${id}`).catch(() => null))?.value ?? null;
      }
      if (!result) {
        throw new UserError(`queued as ${id}, but no host has answered within ${ANSWER_WAIT_MS / 1000} s: ` +
          'it is taken when the host it waits for is up; nothing is lost (see nas cluster status)', 504);
      }
      result.waited_ms = Math.round(performance.now() - queued);
      await this.etcd.kv.delete().key(`homes/${role}/results/${id}`).catch(() => undefined);
      // A merge moved main and the records in one push, which the "main moved" event fetched already (one fetch,
      // not two); a PR that waits moved the records alone: fetched whatever main says.
      await this.follow(role, result.state === 'merged' ? result.main : undefined);
      return result;
    } finally {
      this.waiters.delete(id);
    }
  }
}

type HeadPush = { from: string; to: string; expected: 'any' };

/**
 * Proposals' heads to this host's refs on the git server, one push at a time per Home as every push of this
 * host's branches (`serialized`), and the heads asked for while one runs go together in the next: a burst of
 * proposals from one host is two pushes, not one each.
 */
class HeadPushes {
  private readonly pending = new Map<string, { update: HeadPush; done: (err?: Error) => void }[]>();

  constructor(private readonly pushed: PushedHeads) {}

  push(role: string, server: ServerRepo, update: HeadPush, serialized: <T>(fn: () => Promise<T>) => Promise<T>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiting = this.pending.get(role) ?? [];
      this.pending.set(role, waiting);
      waiting.push({ update, done: (err) => (err ? reject(err) : resolve()) });
      // The first turn to come after this head was added takes it, with every head added by then.
      void serialized(async () => {
        const taken = this.pending.get(role) ?? [];
        this.pending.delete(role);
        if (taken.length === 0) return;
        let err: Error | undefined;
        try {
          // One ref once: the head asked for last; none this host pushed there already.
          const updates = [...new Map(taken.map((t) => [t.update.to, t.update])).values()].filter((u) => !this.pushed.has(role, u.to, u.from));
          if (updates.length > 0) {
            await server.push(updates);
            this.pushed.pushed(role, updates);
          }
        } catch (e) {
          err = e as Error;
        }
        // Every waiter answered, whatever failed: none hangs its `nas propose`.
        for (const t of taken) t.done(err);
      });
    });
  }
}
