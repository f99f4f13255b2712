import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import { mapLimit } from '../util/concurrency.js';
import { checkClusterFiles, type ClusterConfig } from './config.js';
import { ClusterEtcd } from './etcd.js';
import { Membership, type HostRecord } from './hosts.js';
import { announce, putOnServer, seedHome, servedHomes, type SeedOutcome } from './seed.js';

/** Calls to the git server (ls-remote, fetch, push) at once when every Home is matched at start or compared by the reconcile. */
export const SERVER_CALLS = 8;

/**
 * A host's start in the cluster, before its Homes open: etcd reached, every Home matched with its repository
 * (seed.ts) a few at a time with nothing pushed, this host's name taken, and only then the Homes this host alone
 * had put on the server. One refused: nothing was written anywhere, and nasd stops with what to fix.
 */
export async function joinCluster(config: ClusterConfig, stateDir: string, log: Logger, version: string):
  Promise<{ etcd: ClusterEtcd; membership: Membership; seeded: Map<string, SeedOutcome> }> {
  await checkClusterFiles(config);
  const etcd = await ClusterEtcd.connect(config.etcd);
  try {
    await etcd.ping();
  } catch (err) {
    etcd.close();
    throw new UserError(`cluster: cannot reach etcd at ${config.etcd.endpoints.join(', ')} within ${config.etcd.timeout_ms} ms (${(err as Error).message}): ` +
      'check cluster.etcd.endpoints, the TLS files and that etcd runs');
  }
  let membership: Membership | null = null;
  try {
    const roles = new Set(await servedHomes(config, stateDir));
    if (config.homes === 'all') for (const key of await etcd.kv.getAll().prefix('homes/').keys()) if (key.endsWith('/main')) roles.add(key.split('/')[1]);
    const sorted = [...roles].sort();
    const outcomes = await mapLimit(sorted, SERVER_CALLS, (role) => seedHome(config, stateDir, role, log, true));
    const seeded = new Map(sorted.map((role, i) => [role, outcomes[i]!]));
    const me: HostRecord = { host: config.host, version, homes: config.homes, started: new Date().toISOString(), pid: process.pid };
    membership = new Membership(etcd, me, config.writer_ttl_s, log);
    await membership.checkName();
    // Each Home put on the server is announced, so hosts serving "all" learn of it.
    await mapLimit(sorted, SERVER_CALLS, async (role) => {
      if (seeded.get(role) === 'empty') seeded.set(role, await putOnServer(config, stateDir, role, log));
      if (seeded.get(role) !== 'waiting') await announce(etcd, config.host, stateDir, role);
    });
    log.info({ host: config.host, homes: Object.fromEntries(seeded) }, 'cluster: joined');
    return { etcd, membership, seeded };
  } catch (err) {
    await membership?.leave();
    etcd.close();
    throw err;
  }
}
