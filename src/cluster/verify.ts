import { MAIN_REF } from '../store/refs.js';
import type { ServerRepo } from '../store/store.js';
import type { ClusterEtcd } from './etcd.js';
import type { Proposal } from './proposal.js';

/**
 * `nas cluster verify <home>`: main on the git server against the queue. Every merge of a proposal carries its
 * id (the Nas-Proposal trailer): none may be on main twice; a queued proposal already on main is one a writer
 * died before clearing (the next writer answers it); git fsck of this host's copy must be clean.
 */
export interface VerifyReport {
  home: string;
  main: string | null;
  /** This host's main is the server's. */
  current: boolean;
  merges: number;
  /** Proposal ids merged more than once (must be none). */
  twice: string[];
  queued: number;
  /** Queued, yet on main already: cleared by the next writer's batch. */
  queued_on_main: number;
  fsck: string;
  ok: boolean;
}

export async function verifyHome(role: string, server: ServerRepo, local: () => Promise<string | null>, etcd: ClusterEtcd): Promise<VerifyReport> {
  const main = (await server.refs(MAIN_REF)).get(MAIN_REF) ?? null;
  const ours = await local();
  const merged = main && ours === main ? (await server.trailers(MAIN_REF, 'Nas-Proposal')).filter(Boolean) : [];
  const counts = new Map<string, number>();
  for (const id of merged) counts.set(id, (counts.get(id) ?? 0) + 1);
  const queued = (await etcd.list<Proposal>(`homes/${role}/queue/`)).map((q) => q.value);
  const fsck = await server.fsck();
  const twice = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
  return {
    home: role, main, current: ours === main, merges: merged.length, twice, queued: queued.length,
    queued_on_main: queued.filter((q) => counts.has(q.id)).length, fsck, ok: twice.length === 0 && fsck === '' && ours === main,
  };
}
