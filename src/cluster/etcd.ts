import fs from 'node:fs/promises';
import { Etcd3, GRPCDeadlineExceededError, isRecoverableError, type IOptions, type Namespace, type Lease, type Watcher } from 'etcd3';
import type { ClusterConfig } from './config.js';

/**
 * The cluster's etcd client: every call below the configured prefix, and every call but a watch with a
 * deadline (without one a put hung 7 s when the etcd leader was killed). etcd holds only what can be rebuilt
 * from git: who writes each Home's main, the proposals queued for it, and the "main moved" marks.
 */

interface Backoff {
  readonly duration: number;
  next(): Backoff;
}

/** A watch that lost its stream tries again every half second (the library's default backs off to 30 s: long after a partition healed). */
const WATCH_BACKOFF: Backoff = { duration: 500, next: () => WATCH_BACKOFF };

type Policy = NonNullable<NonNullable<IOptions['faultHandling']>['global']>;

/**
 * A call one member refuses or does not answer in time (dead, or cut off: packets dropped) is tried on the next
 * member, three members at most. The library's default retries refusals only, and a deadline that passed on a
 * dead leader failed `nas branch create` outright.
 */
const ON_ANOTHER_MEMBER = {
  async execute<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        const again = isRecoverableError(err as Error) || err instanceof GRPCDeadlineExceededError;
        if (!again || attempt >= 3) throw err;
      }
    }
  },
} as unknown as Policy;

/**
 * Every member stays in the rotation: the library's default stops calling a member for 5 s after 3 failures,
 * and after a leader was killed and came back every member was shut off from the client that way at once.
 * async: the library marks a member failed by passing a function that throws at once and catching the promise;
 * a plain call let that throw escape (a stream cancelled as nasd stopped crashed it: exit 1, the unit failed).
 */
const EVERY_MEMBER = { execute: async <T>(fn: () => Promise<T>) => fn() } as unknown as Policy;

export class ClusterEtcd {
  private constructor(private readonly client: Etcd3, readonly kv: Namespace, readonly timeoutMs: number) {}

  static async connect(c: ClusterConfig['etcd']): Promise<ClusterEtcd> {
    const tls = c.tls
      ? {
          rootCertificate: await fs.readFile(c.tls.ca),
          ...(c.tls.cert ? { certChain: await fs.readFile(c.tls.cert), privateKey: await fs.readFile(c.tls.key!) } : {}),
        }
      : undefined;
    const client = new Etcd3({
      hosts: c.endpoints,
      ...(tls ? { credentials: tls } : {}),
      dialTimeout: c.timeout_ms,
      // A partition drops packets without closing anything: pings find a dead connection within 8 s (etcd refuses
      // pings more often than every 5 s), so the watch reconnects rather than waiting on it in silence. And back
      // within a second of a member answering again: gRPC's reconnect backoff otherwise grows to two minutes.
      grpcOptions: {
        'grpc.keepalive_time_ms': 6000, 'grpc.keepalive_timeout_ms': 2000,
        'grpc.initial_reconnect_backoff_ms': 250, 'grpc.max_reconnect_backoff_ms': 1000,
      },
      faultHandling: { watchBackoff: WATCH_BACKOFF, global: ON_ANOTHER_MEMBER, host: () => EVERY_MEMBER },
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + c.timeout_ms }),
    });
    return new ClusterEtcd(client, client.namespace(`${c.prefix}/`), c.timeout_ms);
  }

  /** How long one call took, in seconds (nas_cluster_etcd_seconds): answered by a read of the namespace's revision. */
  async ping(): Promise<number> {
    const started = performance.now();
    await this.kv.get('hosts/').exec();
    return (performance.now() - started) / 1000;
  }

  async json<T>(key: string): Promise<{ value: T; create: string; mod: string } | null> {
    const res = await this.kv.get(key).exec();
    const kv = res.kvs[0];
    return kv ? { value: JSON.parse(kv.value.toString()) as T, create: kv.create_revision, mod: kv.mod_revision } : null;
  }

  /** Keys under a prefix with their values, oldest first (by create revision). */
  async list<T>(prefix: string, limit = 0): Promise<{ key: string; value: T; create: string }[]> {
    let q = this.kv.getAll().prefix(prefix).sort('Create', 'Ascend');
    if (limit > 0) q = q.limit(limit);
    const res = await q.exec();
    return res.kvs.map((kv) => ({ key: kv.key.toString(), value: JSON.parse(kv.value.toString()) as T, create: kv.create_revision }));
  }

  async count(prefix: string): Promise<number> {
    return this.kv.getAll().prefix(prefix).count();
  }

  /** A lease of this host's (its liveness), kept alive by the caller (hosts.ts); 'lost' once etcd says it is gone. */
  lease(ttlSeconds: number): Lease {
    return this.kv.lease(ttlSeconds, { autoKeepAlive: false });
  }

  /** Watch keys under a prefix (no deadline: a stream); the watcher reconnects by itself. */
  watch(prefix: string): Promise<Watcher> {
    return this.kv.watch().prefix(prefix).create();
  }

  close(): void {
    this.client.close();
  }
}
