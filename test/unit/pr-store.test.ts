import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Store } from '../../src/store/store.js';
import { PrStateConflict, PrStore, type PullRequest } from '../../src/merge/pr-store.js';

/** PR records in a real Store: ids allocated without collisions, decisions taken one at a time. */

describe('PR records', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
  });

  async function prs(): Promise<{ store: Store; prs: PrStore; head: string }> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-prs-'));
    dirs.push(dir);
    const store = await Store.init(`${dir}/h.git`);
    const who = { name: 't', email: 't@x' };
    const head = await store.writeCommit({ tree: await store.writeTree(new Map()), parents: [], message: 'root', author: who });
    return { store, prs: new PrStore(store, who), head };
  }

  const draft = (head: string, branch: string): Omit<PullRequest, 'id'> => ({
    home: 'demo', branch, target: 'main', state: 'waiting', intent: 'x', created: '', updated: '', head, base: head, target_head: head,
    provenance: { principal: 'alice', reads: 0, reads_digest: 'sha256:-' }, changes: { added: 1, modified: 0, deleted: 0, paths: ['A x'] },
    checks: [], trust: { notes_changed: [], unreviewed: [], reviewed_claims: [] }, reasons: [],
  });

  it('gives every PR its own id when many are filed at once', async () => {
    const { prs: store, head } = await prs();
    const created = await Promise.all(Array.from({ length: 8 }, (_, i) => store.create(draft(head, `b${i}`), '')));
    expect(created.map((p) => p.id).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect((await store.list()).map((p) => p.branch).sort()).toEqual(['b0', 'b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7']);
  });

  it('lets exactly one of two racing decisions win', async () => {
    const { prs: store, head } = await prs();
    const pr = await store.create(draft(head, 'b'), '');
    const results = await Promise.allSettled([
      store.transition(pr.id, ['waiting'], (p) => void (p.state = 'merging')),
      store.transition(pr.id, ['waiting', 'failed'], (p) => void (p.state = 'rejected')),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const loser = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(loser.reason).toBeInstanceOf(PrStateConflict);
    expect(['merging', 'rejected']).toContain((await store.get(pr.id))!.state);
  });
});
