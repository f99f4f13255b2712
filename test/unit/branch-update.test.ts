import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MODE, Store } from '../../src/store/store.js';
import { DEFAULT_RULES } from '../../src/policy/policy.js';
import { markedFiles, mergeMainInto, takeSide } from '../../src/merge/update.js';
import { formatMeta } from '../../src/store/file-meta.js';
import { mergeWithMarkers } from '../../src/merge/hunks.js';

/** Main merged into a branch (merge/update.ts) on a real bare repository: what each kind of conflict leaves. */
describe('merging main into a branch', () => {
  let dir: string;
  let store: Store;
  const author = { name: 'test', email: 't@example.com' };
  /** A commit on `parent` with these files written (text or bytes) or removed (null). */
  const commit = async (parent: string | null, files: Record<string, string | Buffer | null>) => {
    const edits = new Map(await Promise.all(Object.entries(files).map(async ([p, t]) =>
      [p, t === null ? null : { oid: await store.writeBlob(t), mode: MODE.file }] as const)));
    const tree = await store.editTree(parent ? (await store.readCommit(parent)).tree : null, edits);
    return store.writeCommit({ tree, parents: parent ? [parent] : [], message: 'x\n', author });
  };
  const read = async (c: string, p: string) => (await store.readBlob((await store.lookupPath((await store.readCommit(c)).tree, p))!.oid)).toString();
  const update = (head: string, main: string) => mergeMainInto(store, { head, main, branch: 'b', rules: DEFAULT_RULES, author });

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-update-'));
    store = await Store.init(dir);
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('puts both versions between markers where both changed the same lines, and takes each side elsewhere', () => {
    const base = 'a\nb\nc\nd\ne\n';
    expect(mergeWithMarkers(base, 'A\nb\nc\nd\ne\n', 'a\nb\nc\nd\nE\n', { ours: 'b', theirs: 'main' })).toBe('A\nb\nc\nd\nE\n');
    expect(mergeWithMarkers(base, 'a\nB1\nc\nd\ne\n', 'a\nB2\nc\nd\nE\n', { ours: 'b', theirs: 'main' }))
      .toBe('a\n<<<<<<< b\nB1\n=======\nB2\n>>>>>>> main\nc\nd\nE\n');
    expect(mergeWithMarkers(base, 'a\nX\nc\nd\ne\n', 'a\nX\nc\nd\ne\n', { ours: 'b', theirs: 'main' })).toBe('a\nX\nc\nd\ne\n');
    expect(mergeWithMarkers('', 'x\n', 'y\n', { ours: 'b', theirs: 'main' })).toBe('<<<<<<< b\nx\n=======\ny\n>>>>>>> main\n');
  });

  it('answers up to date when the branch holds main, and refuses histories that share nothing', async () => {
    const main = await commit(null, { 'a.txt': 'a\n' });
    expect(await update(await commit(main, { 'b.txt': 'b\n' }), main)).toEqual({ kind: 'up-to-date' });
    await expect(update(await commit(null, { 'c.txt': 'c\n' }), main)).rejects.toThrow(/b shares no history with main/);
  });

  it('leaves markers in text, the changed side of a file deleted on the other, the branch\'s bytes, and main then the branch in the journal', async () => {
    const bin = (n: number) => Buffer.from([0, 1, 2, n]);
    const base = await commit(null, {
      'text.md': 'one\ntwo\n', 'gone-on-main.md': 'x\n', 'gone-in-branch.md': 'y\n', 'data.bin': bin(0), 'memory/journal/j.md': 'start\n', 'clean.md': 'c\n',
    });
    const main = await commit(base, {
      'text.md': 'one\nTWO main\n', 'gone-on-main.md': null, 'gone-in-branch.md': 'y main\n', 'data.bin': bin(1), 'memory/journal/j.md': 'start\nmain\n', 'clean.md': 'c main\n',
    });
    const head = await commit(base, {
      'text.md': 'one\nTWO branch\n', 'gone-on-main.md': 'x branch\n', 'gone-in-branch.md': null, 'data.bin': bin(2), 'memory/journal/j.md': 'start\nbranch\n',
    });
    const out = await update(head, main);
    if (out.kind !== 'merged') throw new Error('not merged');
    expect(out.conflicts).toEqual([
      { path: 'data.bin', resolution: 'kept-branch', why: 'it is not text, so it cannot hold both versions', unresolved: true },
      { path: 'gone-in-branch.md', resolution: 'kept-main', why: 'the branch deleted it, main changed it', unresolved: true },
      { path: 'gone-on-main.md', resolution: 'kept-branch', why: 'main deleted it, the branch changed it', unresolved: true },
      { path: 'memory/journal/j.md', resolution: 'appended' },
      { path: 'text.md', resolution: 'markers' },
    ]);
    expect((await store.readCommit(out.commit)).parents).toEqual([head, main]);
    expect(await read(out.commit, 'text.md')).toBe('one\n<<<<<<< b\nTWO branch\n=======\nTWO main\n>>>>>>> main\n');
    expect(await read(out.commit, 'memory/journal/j.md')).toBe('start\nmain\nbranch\n');
    expect(await read(out.commit, 'gone-in-branch.md')).toBe('y main\n');
    expect(await read(out.commit, 'gone-on-main.md')).toBe('x branch\n');
    expect(await read(out.commit, 'data.bin')).toBe(bin(2).toString());
    expect(await read(out.commit, 'clean.md')).toBe('c main\n');
    const changes = await store.fileChanges((await store.readCommit(main)).tree, (await store.readCommit(out.commit)).tree);
    expect(await markedFiles(store, changes, 'b')).toEqual(['text.md']);
    expect(await markedFiles(store, changes, 'other')).toEqual([]);
  });

  it("leaves a mode both changed their own way for a person (times alone are no conflict), and takes main's with its record", async () => {
    const record = (mode: number, uid: number, mtime: number) => formatMeta({ mode: 0o100000 | mode, uid, gid: uid, atimeNs: 0n, mtimeNs: BigInt(mtime) });
    const base = await commit(null, { 'a.md': 'a\n', '.nas-meta/a.md': record(0o644, 0, 1), 'b.md': 'b\n', '.nas-meta/b.md': record(0o644, 0, 1) });
    const main = await commit(base, { '.nas-meta/a.md': record(0o600, 0, 2), 'b.md': 'b main\n', '.nas-meta/b.md': record(0o644, 0, 2) });
    const head = await commit(base, { '.nas-meta/a.md': record(0o640, 0, 3), '.nas-meta/b.md': record(0o644, 0, 3) });
    const out = await update(head, main);
    if (out.kind !== 'merged') throw new Error('not merged');
    expect(out.conflicts).toEqual([{ path: 'a.md', resolution: 'kept-branch', why: 'both changed its mode or owner, each its own way', unresolved: true }]);
    const tookMain = await takeSide(store, { head: out.commit, main, path: 'a.md', take: 'main', branch: 'b', author });
    expect(tookMain.lost).toBeNull();
    expect(await read(tookMain.commit!, '.nas-meta/a.md')).toBe(record(0o600, 0, 2));
    expect(await takeSide(store, { head: out.commit, main, path: 'a.md', take: 'branch', branch: 'b', author })).toMatchObject({ commit: null, lost: null });
  });

  it('refuses a conflict in a read-only path (.nas/), and in an append-only file one side rewrote', async () => {
    const base = await commit(null, { '.nas/policy.yaml': 'version: 1\n', 'memory/journal/j.md': 'start\n' });
    const main = await commit(base, { '.nas/policy.yaml': 'version: 2\n' });
    await expect(update(await commit(base, { '.nas/policy.yaml': 'version: 3\n' }), main)).rejects.toThrow(/\.nas\/policy\.yaml changed on both sides and it is read-only in a branch/);
    const main2 = await commit(base, { 'memory/journal/j.md': 'start\nmain\n' });
    await expect(update(await commit(base, { 'memory/journal/j.md': 'rewritten\n' }), main2)).rejects.toThrow(/j\.md changed on both sides and it is append-only, and one side did not only append/);
  });
});
