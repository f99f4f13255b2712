import { GITLINK, MODE } from '../store/types.js';
import type { Store } from '../store/store.js';
import { parseTree } from '../store/tree-cache.js';

/**
 * The few objects a proposal or a batch of merges adds, sent through etcd beside it, so that the host that needs
 * them (the writer for a proposal's head, every other host for main) writes them at once instead of fetching
 * them from the git server: one git round trip less on each path. The git server still has them first (the
 * proposal's head is pushed before it is queued, main before it is published); this is a copy, checked: each
 * object's id is git's hash of what is written, and the objects are used only when everything they name is here
 * (else the host fetches, as without them). Small changes only: above SHIPPED_MAX nothing is sent.
 */

/** Objects by id: [git's type number, content in base64]. */
export type Shipped = Record<string, [number, string]>;

/** Bytes of objects sent with one proposal or one batch, at most (etcd keeps every revision until compacted). */
const SHIPPED_MAX = 32 * 1024;

const COMMIT = 1;
const TREE = 2;
const BLOB = 3;

/** One object written by its type; its id (null: a kind not sent). */
async function writeOne(store: Store, type: number, data: Buffer): Promise<string | null> {
  if (type === BLOB) return store.writeBlob(data);
  if (type === TREE) return store.writeTree(parseTree(data));
  return type === COMMIT ? store.raw.writeText(type, data) : null;
}

/**
 * What `tips` reach and `known` (a commit the receiver holds, with its history) does not: the commits between,
 * with the trees and blobs each changed against its first parent. null when there is no `known`, a root commit is
 * among them, or they weigh more than SHIPPED_MAX.
 */
export async function objectsSince(store: Store, pairs: [tip: string | null, known: string | null][]): Promise<Shipped | null> {
  const out: Shipped = {};
  let bytes = 0;
  const add = async (oid: string): Promise<boolean> => {
    if (out[oid]) return true;
    const { type, data } = await store.raw.read(oid);
    bytes += data.length;
    out[oid] = [type, data.toString('base64')];
    return bytes <= SHIPPED_MAX;
  };
  const addTree = async (tree: string, base: string | null): Promise<boolean> => {
    if (tree === base) return true;
    if (!(await add(tree))) return false;
    const before = base ? await store.readTree(base) : new Map();
    for (const [name, e] of await store.readTree(tree)) {
      const b = before.get(name);
      if (b?.oid === e.oid || e.mode === GITLINK) continue;
      const ok = e.mode === MODE.tree ? await addTree(e.oid, b?.mode === MODE.tree ? b.oid : null) : await add(e.oid);
      if (!ok) return false;
    }
    return true;
  };
  for (const [tip, known] of pairs) {
    if (!tip || tip === known) continue;
    if (!known) return null;
    const todo = [tip];
    const seen = new Set<string>();
    while (todo.length > 0) {
      const c = todo.pop()!;
      if (seen.has(c) || c === known || (await store.mergeBase(c, known)) === c) continue;
      seen.add(c);
      const commit = await store.readCommit(c);
      if (commit.parents.length === 0 || !(await add(c))) return null;
      if (!(await addTree(commit.tree, (await store.readCommit(commit.parents[0])).tree))) return null;
      todo.push(...commit.parents);
    }
  }
  return Object.keys(out).length > 0 ? out : null;
}

/**
 * Write objects sent through etcd: true when every one is written as its id says and everything they name (the
 * commits' trees and parents, the trees' entries) is here, so they can be used as if fetched.
 */
export async function writeShipped(store: Store, shipped: Shipped): Promise<boolean> {
  // Anything amiss (an object named that is not here, a write refused): the host fetches instead.
  return written(store, shipped).catch(() => false);
}

async function written(store: Store, shipped: Shipped): Promise<boolean> {
  const ids = Object.keys(shipped);
  const data = new Map(ids.map((oid) => [oid, Buffer.from(shipped[oid]![1], 'base64')]));
  // Everything the objects name (a commit's tree and parents, a tree's entries) that is not among them must be here.
  const named = new Set<string>();
  for (const [oid, [type]] of Object.entries(shipped)) {
    if (type === COMMIT) for (const m of data.get(oid)!.toString('latin1').split('\n\n')[0]!.matchAll(/^(?:tree|parent) ([0-9a-f]{40})$/gm)) named.add(m[1]!);
    if (type === TREE) for (const e of parseTree(data.get(oid)!).values()) if (e.mode !== GITLINK) named.add(e.oid);
  }
  // Asked side by side: each is a trip to libgit2's threads.
  const outside = [...named].filter((oid) => !shipped[oid]);
  const [here, outsideHere] = await Promise.all([ids, outside].map((list) => Promise.all(list.map((oid) => store.raw.has(oid)))));
  if (outsideHere!.includes(false)) return false;
  const present = new Set(ids.filter((_, i) => here![i]));
  // Blobs, then trees below before the trees above (a tree is written only once what it names is here), then commits.
  const write = async (oid: string): Promise<boolean> => {
    if (present.has(oid)) return true;
    present.add(oid);
    const type = shipped[oid]![0];
    if (type === TREE) {
      for (const e of parseTree(data.get(oid)!).values()) if (shipped[e.oid] && !(await write(e.oid))) return false;
    }
    return (await writeOne(store, type, data.get(oid)!)) === oid;
  };
  for (const kind of [BLOB, TREE, COMMIT]) {
    for (const [oid, [type]] of Object.entries(shipped)) if (type === kind && !(await write(oid))) return false;
  }
  return true;
}
