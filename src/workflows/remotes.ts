import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import { checkGitUrl } from '../util/git-url.js';
import type { RemoteView } from '../api/types.js';
import type { HomeSet } from '../homes/home-set.js';

/**
 * Replication to git servers people already run (`nas remote add`): each Home's refs are mirrored (main,
 * branches, and the records under refs/nas/) to every remote it has, a few seconds after they change. A remote
 * that refuses is retried at the next change and its error shown in `nas remote list`; nothing local waits on it.
 */
export class Replicator {
  /** Each Home's refs as last mirrored to all its remotes. */
  private readonly mirrored = new Map<string, string>();
  private readonly status = new Map<string, { pushed?: string; error?: string; failures?: number; retryAt?: number }>();
  private busy = false;
  /** Each Home's remotes (name -> URL), read from its Store's git config once: add and remove are the only writers. */
  private readonly remotes = new Map<string, Map<string, string>>();

  constructor(private readonly homes: HomeSet, private readonly log: Logger) {}

  private async mirrorsOf(role: string): Promise<Map<string, string>> {
    let known = this.remotes.get(role);
    if (!known) this.remotes.set(role, (known = await this.homes.homeOf(role).store.mirrors()));
    return known;
  }

  /** Add a remote: the first push must succeed, or nothing is kept. */
  async add(role: string, url: string): Promise<RemoteView> {
    checkGitUrl(url, 'remote');
    const store = this.homes.homeOf(role).store;
    const mirrors = await this.mirrorsOf(role);
    if ([...mirrors.values()].includes(url)) throw new UserError(`Home ${role} mirrors to ${url} already`, 409);
    let held: number;
    try {
      held = await store.remoteRefCount(url);
    } catch (err) {
      throw new UserError(`cannot reach ${url}, so it was not added: ${(err as Error).message}`, 502);
    }
    // A mirror push replaces everything there: only an empty repository may become a replica.
    if (held > 0) throw new UserError(`${url} holds ${held} ref(s) already; mirroring would replace them. Give an empty repository (git init --bare)`, 409);
    let n = 1;
    while (mirrors.has(`nas-${n}`)) n++;
    const name = `nas-${n}`;
    await store.addMirror(name, url);
    try {
      await store.pushMirror(name);
    } catch (err) {
      await store.removeMirror(name);
      throw new UserError(`the remote refused the first push, so it was not added: ${(err as Error).message}`, 502);
    }
    mirrors.set(name, url);
    this.status.set(`${role} ${name}`, { pushed: new Date().toISOString() });
    this.mirrored.delete(role);
    return { role, name, url, pushed: this.status.get(`${role} ${name}`)!.pushed };
  }

  async list(role: string): Promise<RemoteView[]> {
    const mirrors = await this.mirrorsOf(role);
    return [...mirrors].map(([name, url]) => {
      const s = this.status.get(`${role} ${name}`);
      return { role, name, url, ...(s?.pushed ? { pushed: s.pushed } : {}), ...(s?.error ? { error: s.error } : {}) };
    });
  }

  /** Each remote's last good push and the failures since, for the metrics. */
  async health(role: string): Promise<{ name: string; pushed?: number; failures: number }[]> {
    const mirrors = await this.mirrorsOf(role);
    return [...mirrors.keys()].map((name) => {
      const s = this.status.get(`${role} ${name}`);
      return { name, ...(s?.pushed ? { pushed: Date.parse(s.pushed) } : {}), failures: s?.failures ?? 0 };
    });
  }

  async remove(role: string, url: string): Promise<RemoteView> {
    const mirrors = await this.mirrorsOf(role);
    const found = [...mirrors].find(([, u]) => u === url);
    if (!found) throw new UserError(`Home ${role} has no remote ${url}; see nas remote list ${role}`, 404);
    await this.homes.homeOf(role).store.removeMirror(found[0]);
    mirrors.delete(found[0]);
    this.status.delete(`${role} ${found[0]}`);
    return { role, name: found[0], url };
  }

  /** The periodic pass: mirror every Home whose refs changed since they were last mirrored everywhere. */
  async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      for (const role of this.homes.roles()) {
        const mirrors = await this.mirrorsOf(role);
        if (mirrors.size === 0) continue;
        const store = this.homes.homeOf(role).store;
        const refs = JSON.stringify([...(await store.listRefs('refs/'))]);
        if (this.mirrored.get(role) === refs) continue;
        let all = true;
        for (const name of mirrors.keys()) {
          const key = `${role} ${name}`;
          const was = this.status.get(key);
          // A remote that keeps failing is tried less often: 5 s, 10 s, 20 s ... up to 5 minutes.
          if (was?.retryAt && Date.now() < was.retryAt) {
            all = false;
            continue;
          }
          try {
            await store.pushMirror(name);
            this.status.set(key, { pushed: new Date().toISOString() });
          } catch (err) {
            all = false;
            const error = (err as Error).message;
            const failures = (was?.failures ?? 0) + 1;
            if (was?.error !== error) this.log.warn({ role, remote: mirrors.get(name), error }, 'replication push failed; it is retried');
            this.status.set(key, { pushed: was?.pushed, error, failures, retryAt: Date.now() + Math.min(300_000, 5000 * 2 ** (failures - 1)) });
          }
        }
        if (all) this.mirrored.set(role, refs);
      }
    } catch (err) {
      this.log.error({ err }, 'replication pass failed');
    } finally {
      this.busy = false;
    }
  }
}
