import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MODE, RefConflict, Store } from '../../src/store/store.js';
import { MAIN_REF } from '../../src/store/refs.js';
import { Trash } from '../../src/trash/trash.js';
import { mergeIntoMain } from '../../src/merge/merge.js';

/** mergeIntoMain, the one way a change lands on main (PRs and the memory review), on a real bare repository. */
describe('merge into main', () => {
  let dir: string;
  let store: Store;
  let trash: Trash;
  const author = { name: 'test', email: 't@example.com' };
  const main = async () => (await store.readRef(MAIN_REF))!;
  /** A commit on `parent` with these files written (text) or removed (null); on main when `ref` says so. */
  const commit = async (parent: string | null, files: Record<string, string | null>, ref?: string) => {
    const edits = new Map(await Promise.all(Object.entries(files).map(async ([p, t]) =>
      [p, t === null ? null : { oid: await store.writeBlob(t), mode: MODE.file }] as const)));
    const tree = await store.editTree(parent ? (await store.readCommit(parent)).tree : null, edits);
    if (ref) return store.commitTree(ref, { head: parent, tree, message: 'main\n', author });
    return store.writeCommit({ tree, parents: parent ? [parent] : [], message: 'branch\n', author });
  };

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-merge-'));
    store = await Store.init(dir);
    trash = new Trash(store, author);
    await commit(null, { 'a.txt': 'a\n', 'b.txt': 'b\n' }, MAIN_REF);
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('merges a branch into the main it finds (moved since the branch forked), deletions to the recycle area', async () => {
    const head = await commit(await main(), { 'b.txt': null });
    await commit(await main(), { 'c.txt': 'c\n' }, MAIN_REF);
    const before = await main();
    const out = await mergeIntoMain(store, trash, { head, message: 'Merge\n', author });
    expect(out).toMatchObject({ kind: 'merged', deleted: ['b.txt'] });
    expect((await store.readCommit(await main())).parents).toEqual([before, head]);
    expect((await trash.list()).map((r) => r.path)).toEqual(['b.txt']);
  });

  it('with onto, lands on that main only: a main that moved is refused untouched, never merged into', async () => {
    const onto = await main();
    const head = await commit(onto, { 'a.txt': null, 'notes/a.txt': 'a\n' });
    const moved = await commit(onto, { 'd.txt': 'd\n' }, MAIN_REF);
    await expect(mergeIntoMain(store, trash, { head, message: 'Merge\n', author, onto, recycle: false })).rejects.toBeInstanceOf(RefConflict);
    expect(await main()).toBe(moved);

    const again = await commit(moved, { 'a.txt': null, 'notes/a.txt': 'a\n' });
    const out = await mergeIntoMain(store, trash, { head: again, message: 'Merge\n', author, onto: moved, recycle: false });
    expect(out).toMatchObject({ kind: 'merged', deleted: ['a.txt'] });
    expect((await store.readCommit(await main())).parents).toEqual([moved, again]);
    // recycle: false (a move, not a loss): the recycle area holds only the earlier merge's deletion.
    expect((await trash.list()).map((r) => r.path)).toEqual(['b.txt']);
  });
});
