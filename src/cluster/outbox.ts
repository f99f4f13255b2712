import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ClusterEtcd } from './etcd.js';
import type { Proposal } from './proposal.js';

/**
 * Proposals made while this host could not reach etcd (cut off from it): the branch's head is on the git server
 * already, so the proposal waits here, one file each under `<state>/cluster/outbox/<home>/`, and is queued in etcd
 * once etcd answers again. Queued twice (a put that timed out but was applied) is harmless: the writer answers a
 * proposal it filed before from the PR records.
 */
export class Outbox {
  /** Ids queued from here: no one waits for their results, which are cleared as they come. */
  readonly sent = new Set<string>();
  /** Whether anything may wait (at start: what a previous run kept). */
  private waiting = true;

  constructor(private readonly dir: string, private readonly log: Logger) {}

  async keep(p: Proposal): Promise<void> {
    const folder = path.join(this.dir, p.role);
    await fs.mkdir(folder, { recursive: true, mode: 0o700 });
    const file = path.join(folder, `${p.id}.json`);
    await fs.writeFile(`${file}.tmp`, JSON.stringify(p), { mode: 0o600 });
    await fs.rename(`${file}.tmp`, file);
    this.waiting = true;
  }

  /** Queue in etcd what waits, oldest first per Home (ids sort by time); a put that fails stops the pass (the next retries). */
  async send(etcd: ClusterEtcd): Promise<void> {
    if (!this.waiting) return;
    // Cleared first: one kept while this pass reads is looked for by the next.
    this.waiting = false;
    try {
      await this.sendAll(etcd);
    } catch (err) {
      this.waiting = true;
      throw err;
    }
  }

  private async sendAll(etcd: ClusterEtcd): Promise<void> {
    for (const role of await fs.readdir(this.dir).catch(() => [] as string[])) {
      const folder = path.join(this.dir, role);
      const names = (await fs.readdir(folder).catch(() => [] as string[])).filter((n) => n.endsWith('.json')).sort();
      for (const name of names) {
        const text = await fs.readFile(path.join(folder, name), 'utf8');
        const p = JSON.parse(text) as Proposal;
        await etcd.kv.put(`homes/${role}/queue/${p.id}`).value(text);
        this.sent.add(p.id);
        await fs.rm(path.join(folder, name), { force: true });
        this.log.info({ role, proposal: p.id, branch: p.branch }, 'cluster: a proposal made while etcd was out of reach is queued now');
      }
    }
  }
}
