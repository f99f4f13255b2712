import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MODE, RefConflict, Store, type Entry } from '../../src/store/store.js';
import { formatMeta } from '../../src/store/file-meta.js';
import { shownDiff } from '../../src/merge/shown-diff.js';
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

  it('shows a diff with the full modes its records hold (setuid too), and names without content what the reader may not read', async () => {
    const record = async (mode: number, uid = 0) => ({ oid: await store.writeBlob(formatMeta({ mode, uid, gid: uid, atimeNs: 0n, mtimeNs: 0n })), mode: MODE.file });
    const exec = async (text: string): Promise<Entry> => ({ oid: await store.writeBlob(text), mode: MODE.exec });
    const a = await store.editTree(null, new Map([
      ['bin/tool', await exec('#!/bin/sh\necho v1\n')], ['.nas-meta/bin/tool', await record(0o100755)],
      ['shared.txt', await file('shared\n')],
      ['private.md', await file('old secret\n')], ['.nas-meta/private.md', await record(0o100600, 1000)],
    ]));
    const z = await store.editTree(a, new Map([
      // chmod 4755: git's mode stays 100755, only the record says setuid.
      ['.nas-meta/bin/tool', await record(0o104755)],
      ['shared.txt', await file('shared, edited\n')], ['.nas-meta/shared.txt', await record(0o100666)],
      ['private.md', await file('new secret\n')],
      ['added.sh', await exec('echo new\n')], ['.nas-meta/added.sh', await record(0o102755)],
    ]));
    const all = await shownDiff(store, a, z);
    expect(all.patch).toContain('diff --git a/bin/tool b/bin/tool\nold mode 100755\nnew mode 104755\n');
    expect(all.patch).toMatch(/diff --git a\/shared.txt b\/shared.txt\nold mode 100644\nnew mode 100666\nindex [0-9a-f]+\.\.[0-9a-f]+\n--- a\/shared.txt/);
    expect(all.patch).toMatch(/diff --git a\/added.sh b\/added.sh\nnew file mode 102755\n/);
    expect(all.patch).toMatch(/index [0-9a-f]+\.\.[0-9a-f]+ 100600\n[\s\S]*\+new secret/);
    expect(all.withheld).toEqual([]);
    // A reader who may not read private.md: its modes show, its content does not; the rest shows as before.
    const some = await shownDiff(store, a, z, { mayRead: async (_tree, p) => p !== 'private.md' });
    expect(some.withheld).toEqual(['private.md']);
    expect(some.patch).not.toContain('secret');
    expect(some.patch).toContain('diff --git a/private.md b/private.md\ncontent withheld: you could not read private.md through the mount');
    expect(some.patch).toContain('+shared, edited');
    expect(some.shown.map((s) => s.path).sort()).toEqual(['added.sh', 'shared.txt', 'shared.txt']);
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
