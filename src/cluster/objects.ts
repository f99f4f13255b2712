import { createHash } from 'node:crypto';
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

/** Bytes of objects sent with one proposal or one batch, at most (etcd keeps every revision until compacted: kept small). */
const SHIPPED_MAX = 8 * 1024;

const COMMIT = 1;
const TREE = 2;
const BLOB = 3;
const TYPE_NAMES: Record<number, string> = { [COMMIT]: 'commit', [TREE]: 'tree', [BLOB]: 'blob' };

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
  // Each id checked here first, the whole set refused if one is not git's hash of its content: nothing is written
  // from a set that cannot be written whole.
  if (ids.some((oid) => hashOf(shipped[oid]![0], data.get(oid)!) !== oid)) return false;
  const names = new Map(ids.map((oid) => [oid, namedBy(shipped[oid]![0], data.get(oid)!)]));
  // Everything the objects name that is not among them must be here. Asked side by side: each is a trip to libgit2's threads.
  const outside = [...new Set([...names.values()].flat())].filter((oid) => !shipped[oid]);
  const [here, outsideHere] = await Promise.all([ids, outside].map((list) => Promise.all(list.map((oid) => store.raw.has(oid)))));
  if (outsideHere!.includes(false)) return false;
  const present = new Set(ids.filter((_, i) => here![i]));
  // What an object names before it (a commit's parents and tree, a tree's entries): a failed write leaves no
  // object here without what it names, so a later findCommit never takes a half-written history for whole.
  const write = async (oid: string): Promise<boolean> => {
    if (present.has(oid)) return true;
    present.add(oid);
    for (const n of names.get(oid)!) if (shipped[n] && !(await write(n))) return false;
    return (await writeOne(store, shipped[oid]![0], data.get(oid)!)) === oid;
  };
  for (const oid of ids) if (!(await write(oid))) return false;
  return true;
}

/** git's id of an object: sha1 of "<type> <length>\0" and the content (null: a kind not sent). */
function hashOf(type: number, data: Buffer): string | null {
  const name = TYPE_NAMES[type];
  return name ? createHash('sha1').update(`${name} ${data.length}\0`).update(data).digest('hex') : null;
}

/** The ids an object names: a commit's tree and parents, a tree's entries (submodules' commits are not here). */
function namedBy(type: number, data: Buffer): string[] {
  if (type === COMMIT) return [...data.toString('latin1').split('\n\n')[0]!.matchAll(/^(?:tree|parent) ([0-9a-f]{40})$/gm)].map((m) => m[1]!);
  if (type === TREE) return [...parseTree(data).values()].filter((e) => e.mode !== GITLINK).map((e) => e.oid);
  return [];
}
