import { MAIN_REF } from '../store/refs.js';
import type { Store } from '../store/store.js';
import type { ClusterConfig } from './config.js';
import type { ClusterEtcd } from './etcd.js';
import type { HostRecord, Membership } from './hosts.js';

/** `nas cluster status`: etcd's health, the live hosts, and per Home its writer, main, queue and this host's lag. */
export interface ClusterStatus {
  host: string;
  etcd: { endpoints: string[]; ok: boolean; ms?: number; error?: string };
  hosts: (HostRecord & { self: boolean })[];
  homes: {
    role: string;
    writer: string | null;
    epoch: string | null;
    main: string | null;
    published: string | null;
    queued: number;
    /** This host's main is the published one (false: it trails, by `behind` of main's age). */
    current: boolean;
  }[];
}

/** What the status reads of this host's part in the cluster (cluster.ts's Cluster has it). */
interface Reads {
  config: ClusterConfig;
  etcd: ClusterEtcd;
  membership: Pick<Membership, 'live'>;
}

export async function clusterStatus(c: Reads, roles: string[], storeOf: (role: string) => Store | null): Promise<ClusterStatus> {
  const base = { host: c.config.host, hosts: [] as ClusterStatus['hosts'], homes: [] as ClusterStatus['homes'] };
  let ms: number;
  try {
    ms = (await c.etcd.ping()) * 1000;
  } catch (err) {
    return { ...base, etcd: { endpoints: c.config.etcd.endpoints, ok: false, error: (err as Error).message } };
  }
  const hosts = [...(await c.membership.live()).values()].map((h) => ({ ...h, self: h.host === c.config.host }));
  const homes = await Promise.all(roles.map(async (role) => {
    const [writer, main, queued] = await Promise.all([
      c.etcd.json<{ host: string }>(`homes/${role}/writer`),
      c.etcd.json<{ commit: string; at: string }>(`homes/${role}/main`),
      c.etcd.count(`homes/${role}/queue/`),
    ]);
    const ours = (await storeOf(role)?.readRef(MAIN_REF)) ?? null;
    return {
      role, writer: writer?.value.host ?? null, epoch: writer?.create ?? null, main: ours, published: main?.value.at ?? null, queued,
      current: !main || main.value.commit === ours,
    };
  }));
  return { ...base, etcd: { endpoints: c.config.etcd.endpoints, ok: true, ms: Math.round(ms * 10) / 10 }, hosts, homes };
}
