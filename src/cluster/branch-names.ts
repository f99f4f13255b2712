import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import type { ClusterEtcd } from './etcd.js';

/**
 * Branch names across the cluster: a name is one host's, taken in etcd (`homes/<role>/branches/<name>`) before
 * the branch is made here and given back when it goes, so two hosts never make branches of one name (their PRs
 * would supersede each other's).
 */
export class BranchNames {
  constructor(private readonly etcd: ClusterEtcd, private readonly host: string, private readonly log: Logger) {}

  /**
   * Take a name (create revision 0) before the branch is made here. Cut off from etcd, a run's branch (a random
   * name) is made anyway. True when the name was taken now (false: this host held it already).
   */
  async claim(role: string, branch: string, opts: { random: boolean }): Promise<boolean> {
    const key = `homes/${role}/branches/${branch}`;
    try {
      const res = await this.etcd.kv.if(key, 'Create', '==', 0).then(this.etcd.kv.put(key).value(JSON.stringify({ host: this.host, at: new Date().toISOString() }))).commit();
      if (res.succeeded) return true;
      const held = await this.etcd.json<{ host: string }>(key);
      if (!held || held.value.host === this.host) return false;
      throw new UserError(`the branch name ${role}@${branch} is taken by host ${held.value.host} (branch names are one host's across the cluster): choose another name`, 409);
    } catch (err) {
      if (err instanceof UserError) throw err;
      if (opts.random) {
        this.log.warn({ role, branch, err: (err as Error).message }, 'cluster: cannot reach etcd to claim the branch name; a run\'s random name is made anyway');
        return false;
      }
      throw new UserError(`cannot reach etcd to make the branch name ${branch} unique across the hosts (${(err as Error).message}): try again (nas run's branches need no claim)`, 503);
    }
  }

  /** The name goes back when the branch goes (discarded, expired, merged and swept). */
  async release(role: string, branch: string): Promise<void> {
    const key = `homes/${role}/branches/${branch}`;
    try {
      const held = await this.etcd.json<{ host: string }>(key);
      if (held?.value.host === this.host) await this.etcd.kv.if(key, 'Mod', '==', held.mod).then(this.etcd.kv.delete().key(key)).commit();
    } catch (err) {
      this.log.warn({ role, branch, err: (err as Error).message }, 'cluster: cannot give the branch name back; it stays taken by this host');
    }
  }

  /** Which host holds a branch name (null: none). */
  async owner(role: string, branch: string): Promise<string | null> {
    return (await this.etcd.json<{ host: string }>(`homes/${role}/branches/${branch}`))?.value.host ?? null;
  }
}
