import fs from 'node:fs/promises';
import type { Logger } from 'pino';
import { Home } from '../home/home.js';
import { MAIN_REF, PRS_REF } from '../store/refs.js';
import { StalePush, Store, type ServerAccess } from '../store/store.js';
import { UserError } from '../util/errors.js';
import { exists } from '../util/exists.js';
import type { ClusterEtcd } from './etcd.js';
import { repoUrl, type ClusterConfig } from './config.js';

/**
 * Each Home this host serves, matched with its repository on the git server before nasd mounts anything:
 * - on the server, not here: this host's Store is made from the server's main and PR records;
 * - here, the server's repository empty: this host puts its main there (compare-and-swap on an absent ref,
 *   so of two hosts seeding at once one wins and the other takes the server's);
 * - both: the server's main is the truth; this host's main, when the server's does not contain it (a writer
 *   that died before its push: its proposals are still queued and are merged again), is kept under
 *   refs/nas/cluster/unpublished and replaced;
 * - a server repository with refs but no main, or a main with no history in common with this Home's: refused,
 *   with nothing written on the server.
 * At start (`hold`) the pushes wait until every Home was matched ('empty'): one Home refused, nothing was written.
 */

export type SeedOutcome = 'fetched' | 'seeded' | 'joined' | 'waiting' | 'empty';

const SERVER_MAIN = 'refs/nas/cluster/server-main';

export function accessOf(c: ClusterConfig): ServerAccess {
  return { key: c.git.key, tokenFile: c.git.token_file, timeoutMs: c.git.timeout_ms };
}

/** The Homes to serve: the configured list, or every Home in the state directory ("all"). */
export async function servedHomes(c: ClusterConfig, stateDir: string): Promise<string[]> {
  return c.homes === 'all' ? Home.list(stateDir) : c.homes;
}

export async function seedHome(c: ClusterConfig, stateDir: string, role: string, log: Logger, hold = false): Promise<SeedOutcome> {
  const dir = Home.dirFor(stateDir, role);
  const url = repoUrl(c, role);
  const local = await exists(dir);
  if (!local) {
    await fs.mkdir(`${stateDir}/homes`, { recursive: true, mode: 0o700 });
    await fs.mkdir(dir, { mode: 0o700 });
  }
  const store = local ? await Store.open(dir) : await Store.init(dir);
  const server = store.server(url, accessOf(c));
  try {
    let refs: Map<string, string>;
    try {
      refs = await server.refs();
    } catch (err) {
      // git's own words, without the command line.
      const words = (err as Error).message.replace(/^git [^\n]*? -- \S+: /, '').split('\n').slice(-2).join(' ');
      if (/Authentication failed|could not read Username|Permission denied|returned error: 40[13]/.test(words)) {
        throw new UserError(`Home ${role}: the git server refused this host's credentials for ${url} (${words}). ` +
          'Check cluster.git.token_file (https) or cluster.git.key (ssh), and that they may read and push this repository');
      }
      throw new UserError(`Home ${role}: cannot reach its repository on the git server (${url}): ${words}. ` +
        'Check cluster.git.url, that the server runs, and that the repository exists (one empty repository per Home, made on the forge)');
    }
    const theirs = refs.get(MAIN_REF);
    if (!theirs && refs.size > 0) {
      const some = [...refs.keys()].slice(0, 3).join(', ');
      throw new UserError(`Home ${role}: its repository on the git server (${url}) holds ${refs.size} ref(s) (${some}${refs.size > 3 ? ', ...' : ''}) but no main: ` +
        'not this Home\'s. Give this Home an empty repository of its own (cluster.git.url names it with {home})');
    }
    if (!local) {
      if (!theirs) {
        await fs.rm(dir, { recursive: true, force: true });
        log.warn({ role, url }, 'cluster: this Home is neither here nor on the git server yet; it is served once a host seeds it');
        return 'waiting';
      }
      await server.fetch([[MAIN_REF, MAIN_REF], ...(refs.has(PRS_REF) ? [[PRS_REF, PRS_REF] as [string, string]] : [])]);
      await store.setHead(MAIN_REF);
      await fs.mkdir(`${dir}/nas/branches`, { recursive: true });
      return 'fetched';
    }
    const ours = await store.readRef(MAIN_REF);
    if (!ours) throw new UserError(`Home ${role}: ${dir} has no main: not a Home`);
    if (!theirs) return hold ? 'empty' : putOnServer(c, stateDir, role, log);
    if (theirs === ours) {
      if (refs.has(PRS_REF)) await server.fetch([[PRS_REF, PRS_REF]]);
      return 'joined';
    }
    await server.fetch([[MAIN_REF, SERVER_MAIN]]);
    const base = await store.mergeBase(ours, theirs);
    if (!base) {
      await store.deleteRef(SERVER_MAIN, theirs);
      throw new UserError(`Home ${role}: its repository on the git server (${url}) holds another history than this host's Home ${role} ` +
        '(no commit in common): not this Home\'s. Give this Home its own repository, or move this host\'s Home away to take the server\'s');
    }
    if (base !== ours) {
      await store.updateRef(`refs/nas/cluster/unpublished/${Date.now()}`, ours, null, 'cluster: main that never reached the git server');
      log.warn({ role, ours, theirs }, 'cluster: this host\'s main had commits the git server never took (a writer that stopped before its push); kept under refs/nas/cluster/unpublished, main follows the server');
    }
    await server.fetch([[MAIN_REF, MAIN_REF], ...(refs.has(PRS_REF) ? [[PRS_REF, PRS_REF] as [string, string]] : [])]);
    await store.deleteRef(SERVER_MAIN, theirs);
    return 'joined';
  } catch (err) {
    if (!local) await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** This host's Home into its empty repository on the server (compare-and-swap on absent refs): 'seeded', or the server's taken. */
export async function putOnServer(c: ClusterConfig, stateDir: string, role: string, log: Logger): Promise<SeedOutcome> {
  const store = await Store.open(Home.dirFor(stateDir, role));
  try {
    await store.server(repoUrl(c, role), accessOf(c)).push([{ from: MAIN_REF, to: MAIN_REF, expected: null },
      ...((await store.readRef(PRS_REF)) ? [{ from: PRS_REF, to: PRS_REF, expected: null }] : [])]);
    return 'seeded';
  } catch (err) {
    if (!(err instanceof StalePush)) throw err;
    // Another host seeded it first: take its main.
    return seedHome(c, stateDir, role, log);
  }
}

/** A Home this host matched with the server: its main announced unless etcd knows it, so hosts serving "all" learn of it. */
export async function announce(etcd: ClusterEtcd, host: string, stateDir: string, role: string): Promise<void> {
  const key = `homes/${role}/main`;
  const commit = await (await Store.open(Home.dirFor(stateDir, role))).readRef(MAIN_REF);
  await etcd.kv.if(key, 'Create', '==', 0).then(etcd.kv.put(key).value(JSON.stringify({ commit, epoch: '0', host, at: new Date().toISOString() }))).commit();
}
