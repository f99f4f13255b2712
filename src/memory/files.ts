import { createHash } from 'node:crypto';
import { MODE, type Store } from '../store/store.js';
import { mapLimit } from '../util/concurrency.js';
import { MEMORY_ROOTS } from './layout.js';

/** The files the memory tools look at: a Home's memory roots as of one commit, or an in-memory set (tests, benchmarks). */

export interface HomeFile {
  path: string;
  size: number;
  /** Content id: the git blob id for files from a commit. Equal ids mean equal content. */
  id: string;
}

export interface FileSet {
  list(): Promise<HomeFile[]>;
  read(file: HomeFile): Promise<Buffer>;
}

/** Regular files under MEMORY_ROOTS in a git tree (symlinks are not notes and are left out). */
export function treeFiles(store: Store, tree: string): FileSet {
  return {
    async list() {
      const out: HomeFile[] = [];
      const walk = async (oid: string, prefix: string): Promise<void> => {
        const entries = [...(await store.readTree(oid))];
        const files = entries.filter(([, e]) => e.mode === MODE.file || e.mode === MODE.exec);
        const sizes = await mapLimit(files, 16, ([, e]) => store.blobSize(e.oid));
        files.forEach(([name, e], i) => out.push({ path: prefix + name, size: sizes[i], id: e.oid }));
        for (const [name, e] of entries) if (e.mode === MODE.tree) await walk(e.oid, `${prefix}${name}/`);
      };
      for (const root of MEMORY_ROOTS) {
        const entry = await store.lookupPath(tree, root.replace(/\/$/, ''));
        if (!entry) continue;
        if (entry.mode === MODE.tree && root.endsWith('/')) await walk(entry.oid, root);
        else if (entry.mode === MODE.file || entry.mode === MODE.exec) out.push({ path: root, size: await store.blobSize(entry.oid), id: entry.oid });
      }
      return out;
    },
    read: (file) => store.readBlob(file.id),
  };
}

/** The files of a set that pass a test (those a reader could read through the mount). */
export function filterFiles(set: FileSet, keep: (path: string) => Promise<boolean>): FileSet {
  return {
    async list() {
      const files = await set.list();
      const kept = await mapLimit(files, 16, (f) => keep(f.path));
      return files.filter((_, i) => kept[i]);
    },
    read: (file) => set.read(file),
  };
}

/** Files from a path -> content map, restricted to MEMORY_ROOTS like a Home's. */
export function mapFiles(contents: Record<string, string | Buffer>): FileSet {
  const inRoots = (p: string) => MEMORY_ROOTS.some((r) => (r.endsWith('/') ? p.startsWith(r) : p === r));
  const files = Object.entries(contents)
    .filter(([p]) => inRoots(p))
    .map(([p, c]) => {
      const buf = Buffer.from(c);
      return { file: { path: p, size: buf.length, id: createHash('sha1').update(buf).digest('hex') }, buf };
    });
  const byId = new Map(files.map((f) => [f.file.id, f.buf]));
  return {
    list: async () => files.map((f) => f.file),
    read: async (file) => byId.get(file.id) ?? Buffer.alloc(0),
  };
}

/** A file set with some files replaced or added (content) or removed (null): what a commit would hold. */
export function withChanges(set: FileSet, changes: ReadonlyMap<string, Buffer | null>): FileSet {
  const added = [...changes].filter((c): c is [string, Buffer] => c[1] !== null);
  const ids = new Map(added.map(([p, buf]) => [`new:${createHash('sha1').update(buf).digest('hex')}`, buf]));
  return {
    async list() {
      const kept = (await set.list()).filter((f) => !changes.has(f.path));
      return [...kept, ...added.map(([p, buf]) => ({ path: p, size: buf.length, id: `new:${createHash('sha1').update(buf).digest('hex')}` }))];
    },
    read: async (file) => ids.get(file.id) ?? set.read(file),
  };
}
