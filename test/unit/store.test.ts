import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MODE, RefConflict, Store, type Entry } from '../../src/store/store.js';
import { run } from '../helpers.js';

describe('store (a real bare repository through nodegit)', () => {
  let dir: string;
  let store: Store;
  const author = { name: 'test', email: 't@example.com' };
  const git = (...args: string[]) => run('git', [`--git-dir=${dir}`, ...args]);

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-store-'));
    store = await Store.init(dir);
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
    await fs.rm(`${dir}.txt`, { force: true });
  });

  const file = async (text: string): Promise<Entry> => ({ oid: await store.writeBlob(text), mode: MODE.file });

  it('writes blobs git can read, from memory and from disk', async () => {
    const oid = await store.writeBlob('hello\n');
    expect((await git('cat-file', 'blob', oid)).stdout).toBe('hello\n');
    await fs.writeFile(`${dir}.txt`, 'from disk\n');
    const fromDisk = await store.writeBlobFromFile(`${dir}.txt`);
    expect((await git('cat-file', 'blob', fromDisk)).stdout).toBe('from disk\n');
    expect(await store.blobSize(fromDisk)).toBe(10);
    expect((await store.readBlob(oid)).toString()).toBe('hello\n');
  });

  it('writes a large file as the same blob git would, readable by libgit2 and git', async () => {
    const big = `${dir}.big`;
    const data = Buffer.alloc(70 << 20);
    for (let i = 0; i < data.length; i += 4096) data.writeUInt32LE(i, i);
    await fs.writeFile(big, data);
    try {
      const oid = await store.writeBlobFromFile(big);
      expect(oid).toBe((await run('git', ['hash-object', '--no-filters', big])).stdout.trim());
      expect(await store.blobSize(oid)).toBe(data.length);
      expect((await store.readBlob(oid)).equals(data)).toBe(true);
      expect((await git('cat-file', '-s', oid)).stdout.trim()).toBe(String(data.length));
    } finally {
      await fs.rm(big, { force: true });
    }
  });

  it('edits trees touching only changed paths, and drops directories left empty', async () => {
    const t1 = await store.editTree(null, new Map([
      ['a/b/c.md', await file('c')],
      ['a/d.md', await file('d')],
      ['e.md', await file('e')],
      ['run.sh', { oid: await store.writeBlob('#!/bin/sh\n'), mode: MODE.exec }],
    ]));
    expect((await git('ls-tree', '-r', '--name-only', t1)).stdout.split('\n').filter(Boolean)).toEqual(['a/b/c.md', 'a/d.md', 'e.md', 'run.sh']);
    expect((await git('ls-tree', t1, 'run.sh')).stdout).toMatch(/^100755/);
    const before = await store.lookupPath(t1, 'a');
    const t2 = await store.editTree(t1, new Map<string, Entry | null>([['a/b/c.md', null], ['e.md', await file('e2')]]));
    expect((await git('ls-tree', '-r', '--name-only', t2)).stdout.split('\n').filter(Boolean)).toEqual(['a/d.md', 'e.md', 'run.sh']);
    expect((await store.lookupPath(t2, 'a'))?.oid).not.toBe(before?.oid);
    // delete a directory and add a file below the same name: only the new file remains
    const t3 = await store.editTree(t1, new Map<string, Entry | null>([['a', null], ['a/new.md', await file('n')]]));
    expect((await git('ls-tree', '-r', '--name-only', t3, 'a')).stdout.trim()).toBe('a/new.md');
    // changes apply in order: a directory deleted with its file, then the file written again
    const t4 = await store.editTree(t1, new Map<string, Entry | null>([['a/b', null], ['a', null], ['a/b/c.md', await file('again')]]));
    expect((await git('ls-tree', '-r', '--name-only', t4, 'a')).stdout.trim()).toBe('a/b/c.md');
    // a directory deleted and a file written in its place
    const t5 = await store.editTree(t1, new Map<string, Entry | null>([['a/d.md', null], ['a', null], ['a', await file('now a file')]]));
    expect((await git('cat-file', '-p', `${t5}:a`)).stdout).toBe('now a file');
    // an unchanged edit gives the same tree id
    expect(await store.editTree(t1, new Map([['e.md', await file('e')]]))).toBe(t1);
    const fsck = await git('fsck', '--no-progress');
    expect(fsck.code, fsck.stderr).toBe(0);
  });

  it('moves refs only by compare-and-swap: of two racing writers exactly one wins', async () => {
    const tree = await store.editTree(null, new Map([['x', await file('x')]]));
    const root = await store.writeCommit({ tree, parents: [], message: 'root\n', author });
    await store.updateRef('refs/heads/main', root, null, 'create');
    await expect(store.updateRef('refs/heads/main', root, null, 'create again')).rejects.toBeInstanceOf(RefConflict);
    const [a, b] = await Promise.all(['a', 'b'].map(async (n) => {
      const t = await store.editTree(tree, new Map([[n, await file(n)]]));
      return store.writeCommit({ tree: t, parents: [root], message: `${n}\n`, author });
    }));
    const results = await Promise.allSettled([
      store.updateRef('refs/heads/main', a, root, 'a'),
      store.updateRef('refs/heads/main', b, root, 'b'),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const loser = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(loser.reason).toBeInstanceOf(RefConflict);
    const head = (await git('rev-parse', 'main')).stdout.trim();
    expect([a, b]).toContain(head);
    const info = await store.readCommit(head);
    expect(info.parents).toEqual([root]);
    expect((await git('log', '--format=%an <%ae>', '-1', 'main')).stdout.trim()).toBe('test <t@example.com>');
  });

  it('lists refs and reads missing ones as null', async () => {
    expect(await store.readRef('refs/heads/nope')).toBeNull();
    expect([...(await store.listRefs('refs/heads/')).keys()]).toEqual(['refs/heads/main']);
  });
});
