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
      if (Date.now() > deadline) {
        const other = await this.etcd.json<HostRecord>(key).catch(() => null);
        throw new UserError(`the host name ${this.me.host} is taken by a live host (pid ${other?.value.pid ?? '?'}, started ${other?.value.started ?? '?'}): ` +
          'give each host its own cluster.host in nasd.yaml');
      }
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
   * Whether the lease surely still holds at etcd: a keepalive answered within the TTL (less a margin). The
   * library itself gives up only after twice the TTL; a writer must not act that long on a lapsed role.
   */
  fresh(): boolean {
    return this.leaseId !== '' && performance.now() - this.lastAlive < this.ttl * 1000 - 300;
  }

  private lastAlive = 0;

  private watchLease(lease: Lease, id: string): void {
    this.lease = lease;
    this.leaseId = id;
    this.lastAlive = performance.now();
    lease.on('keepaliveSucceeded', () => (this.lastAlive = performance.now()));
    lease.on('lost', (err) => {
      if (this.closed || this.lease !== lease) return;
      this.log.warn({ err: err.message, host: this.me.host }, 'cluster: this host lost its etcd lease (cut off, or paused past its TTL): its writer roles lapsed; rejoining');
      this.lease = null;
      this.leaseId = '';
      this.onLost();
      void this.rejoin();
    });
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

  /** The hosts alive now, by name. */
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
 * hashing), so writers spread evenly and move as little as possible when a host comes or goes.
 */
export function rankFor(role: string, hosts: Iterable<HostRecord>): string[] {
  const serving = [...hosts].filter((h) => h.homes === 'all' || h.homes.includes(role)).map((h) => h.host);
  const score = (host: string) => createHash('sha256').update(`${host}\0${role}`).digest().readUInt32BE(0);
  return serving.sort((a, b) => score(b) - score(a) || (a < b ? -1 : 1));
}
