import fs from 'node:fs/promises';
import yaml from 'js-yaml';
import { MODE, RefConflict, type Entry, type Identity, type Store } from '../store/store.js';
import { mapLimit } from '../util/concurrency.js';
import { TRASH_REF } from '../store/refs.js';
import { formatMeta } from '../store/file-meta.js';

/**
 * The recycle area of a Home: what unlink and rmdir removed from a branch view, kept in the Store under
 * refs/nas/trash as plain text plus the content itself: `<day>/<id>/record.yaml` and `<day>/<id>/content`.
 */

export type TrashKind = 'file' | 'exec' | 'symlink' | 'dir';

export interface TrashRecord {
  id: string;
  path: string;
  branch: string;
  kind: TrashKind;
  size: number;
  deletedAt: string;
  /** Content blob (files and symlinks). */
  oid?: string;
  /** The run that deleted it, when the branch was created for one (--run). */
  run?: string;
  /**
   * What git does not keep of it as it was when deleted (mode, owner, times): its metadata record's line
   * (file-meta.ts formatMeta). A restore gives it back; without one the restored path is the Home owner's.
   */
  meta?: string;
  /**
   * A folder's: when the pass that emptied it began (the first deletion below it since anything below it was
   * last written). What was deleted below it from then until its own deletion went with it (see contentsOf).
   */
  since?: string;
  /** Set once it was restored (`nas trash restore`): when, and where it went. */
  restored?: { at: string; branch: string; to: string };
}

/** A deletion to record: its content is in `oid` already (it was in git) or in `contentFile` (it was only on disk). */
export interface TrashItem {
  record: TrashRecord;
  contentFile?: string;
}

const KIND_MODE: Record<TrashKind, number> = { file: MODE.file, exec: MODE.exec, symlink: MODE.link, dir: MODE.file };

export function newTrashId(now = new Date()): string {
  return `${now.getTime().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** The kind of a git entry: what a restore puts back. */
export function kindOfMode(mode: number): TrashKind {
  return mode === MODE.link ? 'symlink' : mode === MODE.exec ? 'exec' : mode === MODE.tree ? 'dir' : 'file';
}

/** A new record, stamped now, for a path deleted from a branch (by the run, when there is one). */
export function trashRecord(
  path: string, branch: string, kind: TrashKind, opts: { size?: number; oid?: string; run?: string; now?: Date } = {},
): TrashRecord {
  const now = opts.now ?? new Date();
  return {
    id: newTrashId(now), path, branch, kind, size: opts.size ?? 0, deletedAt: now.toISOString(),
    ...(opts.oid ? { oid: opts.oid } : {}), ...(opts.run ? { run: opts.run } : {}),
  };
}

/**
 * Items for files whose content is already in git: what a merge removed from main, a discarded branch's work.
 * `tree`: the tree they are taken from, whose metadata records (mode, owner, times) they keep, as an unlink's do:
 * a restore gives them back, and the recycle area shows them only to who could read them (deleted-access.ts).
 */
export async function itemsFromGit(store: Store, files: { path: string; entry: Entry }[], branch: string, run?: string, tree?: string): Promise<TrashItem[]> {
  const now = new Date();
  return Promise.all(files.map(async ({ path, entry }) => {
    const record = trashRecord(path, branch, kindOfMode(entry.mode), { size: await store.blobSize(entry.oid), oid: entry.oid, run, now });
    const meta = tree ? await store.meta(tree, path, entry.mode) : null;
    if (meta) record.meta = formatMeta(meta).trim();
    return { record };
  }));
}

/** The recycle area's order: newest deletion first. */
export function newestFirst(a: TrashRecord, b: TrashRecord): number {
  return a.deletedAt < b.deletedAt ? 1 : a.deletedAt > b.deletedAt ? -1 : b.id.localeCompare(a.id);
}

/**
 * What was deleted with a folder in one operation: `rm -r` (rm -rf, find -delete, shutil.rmtree) unlinks
 * everything below the folder and then removes the folder, so the folder's record is the last of the pass.
 * The records of that pass are those of the same branch, below the folder, deleted from the time the pass
 * began (the folder record's `since`, stamped by the branch view) up to the folder's own deletion; the newest
 * per path (a file deleted twice in the pass comes back as it was last). A file deleted below the folder
 * before the pass, with writes below the folder since, is not part of it; records without `since` (made all
 * at once, as a discarded branch's) take what was deleted at the same instant. Newest first, as `all` is.
 */
export function contentsOf(folder: TrashRecord, all: TrashRecord[]): TrashRecord[] {
  if (folder.kind !== 'dir') return [];
  const from = folder.since && folder.since < folder.deletedAt ? folder.since : folder.deletedAt;
  const seen = new Set<string>();
  const out: TrashRecord[] = [];
  for (const r of all) {
    if (r.id === folder.id || r.branch !== folder.branch || !r.path.startsWith(`${folder.path}/`)) continue;
    if (r.deletedAt < from || r.deletedAt > folder.deletedAt || seen.has(r.path)) continue;
    seen.add(r.path);
    out.push(r);
  }
  return out;
}

/**
 * The records by deletion: each folder deletion gets the count and bytes of what went with it (contentsOf), and
 * each of those records names the folder (`within`); an outer folder takes the folders inside it. Newest first.
 */
export function byDeletion<T extends TrashRecord>(records: T[]): (T & { contents?: { count: number; bytes: number }; within?: string })[] {
  const out = records.map((r) => ({ ...r } as T & { contents?: { count: number; bytes: number }; within?: string }));
  const byId = new Map(out.map((r) => [r.id, r]));
  for (const folder of out) {
    if (folder.kind !== 'dir' || folder.within) continue;
    const inside = contentsOf(folder, records).map((r) => byId.get(r.id)!).filter((r) => !r.within);
    for (const r of inside) r.within = folder.id;
    const files = inside.filter((r) => r.kind !== 'dir');
    folder.contents = { count: files.length, bytes: files.reduce((n, r) => n + r.size, 0) };
  }
  return out;
}

function recordDir(r: TrashRecord): string {
  return `${r.deletedAt.slice(0, 10)}/${r.id}`;
}

export class Trash {
  constructor(private readonly store: Store, private readonly identity: Identity) {}

  /** Store deletions in one commit on the trash ref; records already stored (same id) are skipped. */
  async add(items: TrashItem[]): Promise<void> {
    if (items.length === 0) return;
    const contents = new Map<string, Entry | null>();
    const stored = await mapLimit(items, 16, async ({ record, contentFile }) => {
      if (record.kind !== 'dir' && contentFile) record.oid = await this.hashFile(contentFile, record.kind);
      return this.store.writeBlob(yaml.dump(record));
    });
    items.forEach(({ record }, i) => {
      const dir = recordDir(record);
      contents.set(`${dir}/record.yaml`, { oid: stored[i], mode: MODE.file });
      if (record.oid) contents.set(`${dir}/content`, { oid: record.oid, mode: KIND_MODE[record.kind] });
    });
    const paths = items.map((i) => `${i.record.branch}:${i.record.path}`);
    const message = `trash: ${items.length} deleted (${paths.slice(0, 5).join(', ')}${paths.length > 5 ? ', ...' : ''})\n`;
    await this.store.commitToRef(TRASH_REF, async (base) => {
      const changes = new Map<string, Entry | null>();
      for (const [path, entry] of contents) {
        if (base && (await this.store.lookupPath(base, path))) continue;
        changes.set(path, entry);
      }
      return changes;
    }, message, this.identity);
  }

  private async hashFile(file: string, kind: TrashKind): Promise<string> {
    if (kind === 'symlink') return this.store.writeBlob(await fs.readlink(file));
    return this.store.writeBlobFromFile(file);
  }

  /**
   * Remove what was deleted before `cutoff` from the recycle area for good. The area starts a new history with
   * what is left, so what went becomes unreachable (git gc reclaims it once it is old enough; content a branch
   * or main still has in its history stays). Retried if a deletion lands meanwhile.
   */
  async purge(cutoff: Date): Promise<TrashRecord[]> {
    for (;;) {
      const head = await this.store.readRef(TRASH_REF);
      if (!head) return [];
      const gone = (await this.list()).filter((r) => Date.parse(r.deletedAt) < cutoff.getTime());
      if (gone.length === 0) return [];
      const changes = new Map<string, Entry | null>();
      for (const r of gone) {
        changes.set(`${recordDir(r)}/record.yaml`, null);
        if (r.oid) changes.set(`${recordDir(r)}/content`, null);
        if (r.restored) changes.set(`${recordDir(r)}/restored.yaml`, null);
      }
      const tree = await this.store.editTree((await this.store.readCommit(head)).tree, changes);
      try {
        await this.store.restartRef(TRASH_REF, head, tree, `trash: purged ${gone.length} deleted before ${cutoff.toISOString()}\n`, this.identity);
        return gone;
      } catch (e) {
        if (!(e instanceof RefConflict)) throw e;
      }
    }
  }

  /** Mark records restored (each keeps its place in the area until it is purged). */
  async markRestored(records: TrashRecord[], where: { branch: string; to: (r: TrashRecord) => string }): Promise<void> {
    if (records.length === 0) return;
    const at = new Date().toISOString();
    const marks = new Map<string, Entry | null>();
    for (const r of records) {
      const blob = await this.store.writeBlob(yaml.dump({ at, branch: where.branch, to: where.to(r) }));
      marks.set(`${recordDir(r)}/restored.yaml`, { oid: blob, mode: MODE.file });
    }
    await this.store.commitToRef(TRASH_REF, async () => marks, `trash: ${records.length} restored into ${where.branch}\n`, this.identity);
  }

  /** Every record, newest first. */
  async list(): Promise<TrashRecord[]> {
    const head = await this.store.readRef(TRASH_REF);
    if (!head) return [];
    const root = await this.store.readTree((await this.store.readCommit(head)).tree);
    const out: TrashRecord[] = [];
    for (const day of root.values()) {
      for (const item of (await this.store.readTree(day.oid)).values()) {
        const files = await this.store.readTree(item.oid);
        const rec = files.get('record.yaml');
        if (!rec) continue;
        const parsed = yaml.load((await this.store.readBlob(rec.oid)).toString(), { schema: yaml.CORE_SCHEMA }) as TrashRecord;
        const restored = files.get('restored.yaml');
        if (restored) parsed.restored = yaml.load((await this.store.readBlob(restored.oid)).toString(), { schema: yaml.CORE_SCHEMA }) as TrashRecord['restored'];
        out.push(parsed);
      }
    }
    return out.sort(newestFirst);
  }

  async content(record: TrashRecord): Promise<Buffer> {
    if (!record.oid) return Buffer.alloc(0);
    return this.store.readBlob(record.oid);
  }
}
