import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MODE, Store } from '../../src/store/store.js';
import { MAIN_REF } from '../../src/store/refs.js';
import { run } from '../helpers.js';
import { objectsSince, writeShipped } from '../../src/cluster/objects.js';

/**
 * A merge's or a proposal's new objects sent through etcd (src/cluster/objects.ts): a host that holds main as it
 * was gets them whole and usable (git fsck finds nothing missing), or is told to fetch.
 */
describe('objects sent beside a proposal or a merge', () => {
  let dir: string;
  let sender: Store;
  let receiver: Store;
  const author = { name: 'test', email: 't@example.com' };
  const commit = async (parents: string[], files: Record<string, string | Buffer>) => {
    const edits = new Map(await Promise.all(Object.entries(files).map(async ([p, t]) => [p, { oid: await sender.writeBlob(t), mode: MODE.file }] as const)));
    const tree = await sender.editTree(parents[0] ? (await sender.readCommit(parents[0])).tree : null, edits);
    return sender.writeCommit({ tree, parents, message: 'c\n', author });
  };
  const fsck = async (store: Store, ref: string) => (await run('git', ['--git-dir', store.path, 'fsck', '--connectivity-only', '--no-dangling', ref])).code;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-objects-'));
    sender = await Store.init(path.join(dir, 'sender'));
    receiver = await Store.init(path.join(dir, 'receiver'));
    const root = await commit([], { 'a.txt': 'a\n', 'docs/x.md': 'x\n' });
    await sender.updateRef(MAIN_REF, root, null, 'root');
    // The receiver holds main as it was: by a bundle, as a follower holds it by a fetch.
    await run('git', ['--git-dir', sender.path, 'bundle', 'create', path.join(dir, 'main.bundle'), MAIN_REF]);
    await run('git', ['--git-dir', receiver.path, 'fetch', '-q', path.join(dir, 'main.bundle'), `+${MAIN_REF}:${MAIN_REF}`]);
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('a branch merged into main: the merge and the branch arrive whole, binary content included', async () => {
    const main = (await sender.readRef(MAIN_REF))!;
    const branch = await commit([main], { 'docs/new.bin': Buffer.from([0, 1, 200, 255, 10]), 'docs/y.md': 'y\n' });
    const later = await commit([branch], { 'docs/y.md': 'y2\n' });
    const merge = await commit([main, later], { 'docs/new.bin': Buffer.from([0, 1, 200, 255, 10]), 'docs/y.md': 'y2\n' });
    const shipped = await objectsSince(sender, [[merge, main]]);
    expect(shipped).not.toBeNull();
    expect(await receiver.findCommit(merge)).toBeNull();
    expect(await writeShipped(receiver, shipped!)).toBe(true);
    await receiver.updateRef('refs/heads/merged', merge, null, 'test');
    expect(await fsck(receiver, 'refs/heads/merged')).toBe(0);
  });

  it('objects relative to a commit the receiver lacks are refused (it fetches instead)', async () => {
    const main = (await sender.readRef(MAIN_REF))!;
    const unseen = await commit([main], { 'u.txt': 'u\n' });
    const next = await commit([unseen], { 'v.txt': 'v\n' });
    const shipped = await objectsSince(sender, [[next, unseen]]);
    expect(await writeShipped(receiver, shipped!)).toBe(false);
  });

  it('a tampered object: the whole set is refused and none of it written', async () => {
    const main = (await sender.readRef(MAIN_REF))!;
    const parent = await commit([main], { 't.txt': 'true\n' });
    const tip = await commit([parent], { 't2.txt': 'tip\n' });
    const shipped = (await objectsSince(sender, [[tip, main]]))!;
    // The parent commit altered: a tip written before it would be here without its history.
    shipped[parent] = [1, Buffer.from(Buffer.from(shipped[parent]![1], 'base64').toString('latin1').replace(/\nc\n$/, '\nforged\n'), 'latin1').toString('base64')];
    expect(await writeShipped(receiver, shipped)).toBe(false);
    expect(await receiver.findCommit(tip)).toBeNull();
    expect(await receiver.findCommit(parent)).toBeNull();
  });

  it('a commit whose parent is missing from the set: refused, the tip is not written', async () => {
    const main = (await sender.readRef(MAIN_REF))!;
    const parent = await commit([main], { 'p.txt': 'p\n' });
    const tip = await commit([parent], { 'q.txt': 'q\n' });
    const shipped = (await objectsSince(sender, [[tip, main]]))!;
    delete shipped[parent];
    expect(await writeShipped(receiver, shipped)).toBe(false);
    expect(await receiver.findCommit(tip)).toBeNull();
  });

  it('nothing is sent above the size cap, nor without a commit both sides hold', async () => {
    const main = (await sender.readRef(MAIN_REF))!;
    const big = await commit([main], { 'big.txt': 'x'.repeat(64 * 1024) });
    expect(await objectsSince(sender, [[big, main]])).toBeNull();
    expect(await objectsSince(sender, [[big, null]])).toBeNull();
  });
});
