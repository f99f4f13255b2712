import { createHash } from 'node:crypto';
import type { Lease } from 'etcd3';
import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import type { ClusterEtcd } from './etcd.js';

/**
 * This host's membership: one session lease (TTL `writer_ttl`) that holds its key `hosts/<name>` and every
 * writer key it wins, so all its roles lapse together when it stops answering (etcd's clock, not the hosts').
 * A name is one live host's: a second nasd with the same name is refused at start.
 */

export interface HostRecord {
  host: string;
  version: string;
  homes: string[] | 'all';
  started: string;
  /** Since when it serves (its Homes mounted, standing for writer): writers move to it only after that. */
  serving?: string;
  pid: number;
  /** `nas cluster leave --drain`: serving, but standing for no writer role. */
  draining?: boolean;
}

export class Membership {
  private lease: Lease | null = null;
  private leaseId = '';
  private closed = false;
  /** Called when the lease was lost (every writer role with it) and again once this host is back. */
  onLost: () => void = () => undefined;
  onRejoined: () => void = () => undefined;

  constructor(private readonly etcd: ClusterEtcd, private readonly me: HostRecord, private readonly ttl: number, private readonly log: Logger) {}

  get host(): string {
    return this.me.host;
  }

  /** The lease id writer keys are put with ('' while this host has none). */
  get id(): string {
    return this.leaseId;
  }

  /**
   * Before nasd mounts anything: the name must not be a live host's. A key left by this host's previous process
   * goes with its lease (within the TTL), so a restart waits that long. The lease itself is taken by join(),
   * once nasd serves: a start-up that keeps the event loop busy past a short TTL would lose it at once.
   */
  async checkName(): Promise<void> {
    const deadline = Date.now() + (this.ttl + 1) * 1000;
    for (;;) {
      const other = await this.etcd.json<HostRecord>(`hosts/${this.me.host}`);
      if (!other) return;
      if (Date.now() > deadline) throw this.taken(other.value);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  private taken(other: HostRecord | undefined): UserError {
    return new UserError(`the host name ${this.me.host} is taken by a live host (pid ${other?.pid ?? '?'}, started ${other?.started ?? '?'}): ` +
      'give each host its own cluster.host in nasd.yaml');
  }

  /**
   * Join: take `hosts/<name>` on a fresh lease. A key left by this host's previous process goes with its lease
   * (within the TTL), so a restart waits that long; a name still held after it is another live host's.
   */
  async join(): Promise<void> {
    const deadline = Date.now() + (this.ttl + 1) * 1000;
    for (;;) {
      const lease = this.etcd.lease(this.ttl);
      const id = await lease.grant();
      const key = `hosts/${this.me.host}`;
      const res = await this.etcd.kv.if(key, 'Create', '==', 0).then(this.etcd.kv.put(key).value(JSON.stringify(this.me)).lease(id)).commit();
      if (res.succeeded) {
        this.watchLease(lease, id);
        return;
      }
      await lease.revoke().catch(() => undefined);
      if (Date.now() > deadline) throw this.taken((await this.etcd.json<HostRecord>(key).catch(() => null))?.value);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /**
   * This host serves from now on (true), or stops serving (false, as it stops: its roles are not handed back to it
   * while it lets them go): its record says so, on the same lease.
   */
  async serving(yes: boolean): Promise<void> {
    if (yes) this.me.serving = new Date().toISOString();
    else delete this.me.serving;
    if (this.leaseId) await this.etcd.kv.put(`hosts/${this.me.host}`).value(JSON.stringify(this.me)).lease(this.leaseId);
  }

  /** The hosts serving now (live, and attached): the ones writers are ranked among. */
  async servingHosts(): Promise<HostRecord[]> {
    return [...(await this.live()).values()].filter((h) => h.serving);
  }

  /**
   * Whether the lease surely still holds at etcd: a keepalive sent less than the TTL ago (less a margin) was
   * answered, and etcd counts the TTL from when it got it. A writer must not act on a role that may have lapsed.
   */
  fresh(): boolean {
    return this.leaseId !== '' && performance.now() - this.lastAlive < this.ttl * 1000 - 300;
  }

  private lastAlive = 0;

  /**
   * Keep the lease alive: a keepalive every quarter TTL, each a call of its own with a deadline, so one sent to
   * an etcd member that no longer answers (a partition drops packets, nothing is closed) costs a quarter TTL, not
   * the lease: the library's own keepalive stream notices the silence only after the whole TTL, when etcd has let
   * the lease go. None answered for a TTL: the lease is taken as lost (and revoked, should etcd still answer).
   */
  private watchLease(lease: Lease, id: string): void {
    this.lease = lease;
    this.leaseId = id;
    this.lastAlive = performance.now();
    const every = Math.max(200, (this.ttl * 1000) / 4);
    const lost = (err: Error) => {
      clearInterval(timer);
      if (this.closed || this.lease !== lease) return;
      this.log.warn({ err: err.message, host: this.me.host }, 'cluster: this host lost its etcd lease (cut off, or paused past its TTL): its writer roles lapsed; rejoining');
      this.lease = null;
      this.leaseId = '';
      void lease.revoke().catch(() => undefined);
      this.onLost();
      void this.rejoin();
    };
    // Each beat tries twice (the etcd client picks a member at random for every call), each try a beat long: a
    // shorter deadline failed calls on a loaded machine, and each failure closes the client's channel to that member.
    const beat = async () => {
      for (let attempt = 0; attempt < 2 && this.lease === lease; attempt++) {
        const sent = performance.now();
        try {
          await lease.keepaliveOnce({ deadline: Date.now() + every });
          if (sent > this.lastAlive) this.lastAlive = sent;
          return;
        } catch (err) {
          this.log.debug({ err: (err as Error).message, host: this.me.host }, 'cluster: a keepalive of this host\'s lease failed');
        }
      }
    };
    const timer = setInterval(() => {
      if (this.lease !== lease) return void clearInterval(timer);
      if (performance.now() - this.lastAlive > this.ttl * 1000) return lost(new Error(`no keepalive answered for ${this.ttl} s`));
      void beat();
    }, every);
    lease.on('lost', lost);
  }

  private async rejoin(): Promise<void> {
    for (let wait = 250; !this.closed; wait = Math.min(wait * 2, 5000)) {
      try {
        await this.join();
        this.log.info({ host: this.me.host }, 'cluster: rejoined');
        this.onRejoined();
        return;
      } catch (err) {
        this.log.debug({ err }, 'cluster: rejoin failed; retrying');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /** Say something new of this host (draining or not) under its lease. */
  async update(change: Partial<HostRecord>): Promise<void> {
    Object.assign(this.me, change);
    if (this.leaseId) await this.etcd.kv.put(`hosts/${this.me.host}`).value(JSON.stringify(this.me)).lease(this.leaseId);
  }

  get draining(): boolean {
    return !!this.me.draining;
  }

  /** The hosts alive now, by name. */
  private readonly seen = new Map<string, number>();

  /** How long (ms) each of these serving hosts has served, as this host saw it come: the hosts' clocks may differ. */
  servingFor(hosts: HostRecord[]): Map<string, number> {
    const who = (h: HostRecord) => `${h.host} ${h.pid} ${h.started}`;
    const serving = new Map(hosts.map((h) => [who(h), h.host]));
    for (const h of serving.keys()) if (!this.seen.has(h)) this.seen.set(h, performance.now());
    for (const h of this.seen.keys()) if (!serving.has(h)) this.seen.delete(h);
    return new Map([...serving].map(([h, host]) => [host, performance.now() - this.seen.get(h)!]));
  }

  async live(): Promise<Map<string, HostRecord>> {
    return new Map((await this.etcd.list<HostRecord>('hosts/')).map((h) => [h.value.host, h.value]));
  }

  async leave(): Promise<void> {
    this.closed = true;
    const lease = this.lease;
    this.lease = null;
    this.leaseId = '';
    await lease?.revoke().catch(() => undefined);
  }
}

/**
 * Where each Home's writer should be: the live hosts serving it ranked by a hash of host and Home (rendezvous
 * hashing), so writers spread evenly and move as little as possible when a host comes or goes. A host an
 * operator preferred for the Home (`nas cluster writer --move-to`) comes first; a draining host not at all.
 */
export function rankFor(role: string, hosts: Iterable<HostRecord>, preferred?: string): string[] {
  const serving = [...hosts].filter((h) => !h.draining && (h.homes === 'all' || h.homes.includes(role))).map((h) => h.host);
  const score = (host: string) => (host === preferred ? 2 ** 32 : createHash('sha256').update(`${host}\0${role}`).digest().readUInt32BE(0));
  return serving.sort((a, b) => score(b) - score(a) || (a < b ? -1 : 1));
}

/** `nas cluster writer <home> --move-to <host>|any`: the preference put in etcd, and where the writer is after (waited up to 15 s). */
export async function preferWriter(etcd: ClusterEtcd, membership: Membership, role: string, to: string): Promise<{ home: string; writer: string | null; preferred: string | null }> {
  const key = `homes/${role}/prefer`;
  if (to === 'any') await etcd.kv.delete().key(key);
  else {
    const host = (await membership.live()).get(to);
    if (!host) throw new UserError(`no live host is named ${to}: see nas cluster status`, 404);
    if (host.draining || !(host.homes === 'all' || host.homes.includes(role))) throw new UserError(`host ${to} does not stand for writer of Home ${role} (it is draining, or does not serve it)`, 409);
    await etcd.kv.put(key).value(JSON.stringify({ host: to, at: new Date().toISOString() }));
  }
  const writer = async () => (await etcd.json<{ host: string }>(`homes/${role}/writer`))?.value.host ?? null;
  const deadline = Date.now() + 15_000;
  let now = await writer();
  while (to !== 'any' && now !== to && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    now = await writer();
  }
  return { home: role, writer: now, preferred: to === 'any' ? null : to };
}
