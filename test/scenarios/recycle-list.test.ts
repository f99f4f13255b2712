import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, run } from '../helpers.js';

/** The recycle area as `nas trash list` and `nas trash purge` show it, whatever the commit window. */
describe('recycle area: pending deletions and purge', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@bin', rel);
  type Row = { path: string; id: string; pending?: boolean };

  beforeAll(async () => {
    // A long commit window: a deletion stays pending until nas sync, so "right after rm" is not a race.
    d = await TestDaemon.withBranch('bin', { windowMs: 60_000 });
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('lists a deletion right after rm, marked pending, before its commit lands', async () => {
    await fs.writeFile(p('outbox/soon-gone.md'), 'bytes\n');
    await d.sync('demo/bin');
    await fs.unlink(p('outbox/soon-gone.md'));
    const rows = await d.nasJson<Row[]>('trash', 'list', 'demo');
    expect(rows).toContainEqual(expect.objectContaining({ path: 'outbox/soon-gone.md', branch: 'bin', kind: 'file', size: 6, pending: true }));
    expect((await d.nas('trash', 'list', 'demo')).stdout).toMatch(/outbox\/soon-gone\.md\s+\S+\s+pending/);
    // Once the commit lands it is filed, shown once, with the same id.
    const id = rows.find((r) => r.path === 'outbox/soon-gone.md')!.id;
    await d.sync('demo/bin');
    const filed = (await d.nasJson<Row[]>('trash', 'list', 'demo')).filter((r) => r.path === 'outbox/soon-gone.md');
    expect(filed).toEqual([expect.objectContaining({ id })]);
    expect(filed[0].pending).toBeUndefined();
  });

  it('restores a deletion still pending (filing it first)', async () => {
    await fs.writeFile(p('outbox/back.md'), 'keep me\n');
    await d.sync('demo/bin');
    await fs.unlink(p('outbox/back.md'));
    const restored = await d.nas('trash', 'restore', 'demo', 'outbox/back.md');
    expect(restored.code, restored.stderr).toBe(0);
    expect(await fs.readFile(p('outbox/back.md'), 'utf8')).toBe('keep me\n');
  });

  it('names a folder removed whole once in the PR\'s reasons, with its count, not one path per file', async () => {
    const files: Record<string, string> = { 'outbox/keep.md': 'keep\n', 'outbox/lone.md': 'lone\n' };
    for (let i = 0; i < 300; i++) files[`outbox/bulk/${i % 3 ? 'deep/' : ''}f${i}.txt`] = `file ${i}\n`;
    await d.pushToMain(files, 'a folder of 300 files');
    expect((await d.nas('branch', 'create', 'demo/tidy')).code).toBe(0);
    expect((await run('rm', ['-r', d.path('demo@tidy', 'outbox/bulk')])).code).toBe(0);
    await fs.unlink(d.path('demo@tidy', 'outbox/lone.md'));
    await d.sync('demo/tidy');
    const pr = await d.nasJson('propose', 'demo/tidy', '--into', 'main', '--intent', 'tidy the outbox');
    expect(pr.reasons).toContain('deletes outbox/bulk/ (300 files), outbox/lone.md');
  });

  it('lists one entry per deletion (a folder with its count and size), narrows by branch, path, search and date, and drops what was restored', async () => {
    type Listed = Row & { branch: string; kind: string; within?: string; contents?: { count: number; bytes: number }; restored?: { branch: string } };
    const text = async (...args: string[]) => (await d.nas('trash', 'list', 'demo', ...args)).stdout;
    const rows = (out: string) => out.split('\n').slice(1).filter(Boolean);
    // One rm -r of 300 files: one row, with its count and bytes; --json has every record, each inside the folder's.
    const tidy = rows(await text('--branch', 'tidy'));
    expect(tidy).toHaveLength(2);
    expect(tidy.find((r) => r.includes('outbox/bulk/'))).toMatch(/ dir +[\d.]+ KiB +outbox\/bulk\/ \(300 files\) /);
    const all = (await d.nasJson<Listed[]>('trash', 'list', 'demo', '--branch', 'tidy'));
    const folder = all.find((r) => r.path === 'outbox/bulk')!;
    expect(folder.contents).toEqual({ count: 300, bytes: all.filter((r) => r.within === folder.id && r.kind !== 'dir').reduce((n, r) => n + (r as unknown as { size: number }).size, 0) });
    expect(all.filter((r) => r.within === folder.id && r.kind === 'file')).toHaveLength(300);
    // Narrowed: by path (under a folder), by a search in the path, by date; what matches nothing says so.
    expect(rows(await text('--path', 'outbox/bulk'))).toHaveLength(1);
    expect(rows(await text('--search', 'LONE'))).toEqual([expect.stringMatching(/outbox\/lone\.md/)]);
    expect(rows(await text('--all', '--search', 'f299.txt'))).toEqual([expect.stringMatching(/outbox\/bulk\/deep\/f299\.txt/)]);
    expect(await text('--since', '1s', '--branch', 'no-such')).toBe('nothing in the recycle area matches\n');
    expect((await d.nas('trash', 'list', 'demo', '--since', 'soon')).stderr).toMatch(/--since/);
    // Restored, the folder and what went with it leave the list (--all shows where they went).
    const restored = await d.nas('trash', 'restore', 'demo', 'outbox/bulk', '--branch', 'tidy');
    expect(restored.stdout).toMatch(/restored outbox\/bulk .* with 3\d\d path\(s\) deleted with it/);
    expect(rows(await text('--branch', 'tidy')).map((r) => r.includes('outbox/bulk'))).toEqual([false]);
    expect(rows(await text('--branch', 'tidy', '--all', '--path', 'outbox/bulk')).every((r) => /restored to tidy:outbox\/bulk/.test(r))).toBe(true);
    expect(await fs.readFile(d.path('demo@tidy', 'outbox/bulk/deep/f299.txt'), 'utf8')).toBe('file 299\n');
  });

  it('purges everything with --older-than 0d', async () => {
    expect((await d.nasJson<Row[]>('trash', 'list', 'demo')).length).toBeGreaterThan(0);
    const r = await d.nas('trash', 'purge', 'demo', '--older-than', '0d');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/purged [1-9]\d* item/);
    expect(await d.nasJson<Row[]>('trash', 'list', 'demo')).toEqual([]);
    // A TTL of zero still means nothing useful.
    const ttl = await d.nas('branch', 'create', 'demo/zero', '--ttl', '0h');
    expect(ttl.code).toBe(1);
    expect(ttl.stderr).toMatch(/must be positive/);
  });
});
