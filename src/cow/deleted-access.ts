import { constants } from 'node:fs';
import { MODE, type Store } from '../store/store.js';
import { fullMode, parseMeta } from '../store/file-meta.js';
import { permits, visibleMode, type Reader } from '../policy/policy.js';
import { OwnerShare, inboxPlace } from './owner-share.js';
import type { Attr, Owner } from './attr.js';
import type { TrashKind, TrashRecord } from '../trash/trash.js';

/**
 * Whether a reader could have read a deleted path through the view it was deleted from: search on every folder
 * above it, read on it (a symlink needs only the search), as the kernel decides it (read-access.ts does the same
 * for what a tree still holds). The recycle area's list and restore show a caller who is not the owner no more:
 * the names, sizes and contents of what it could not read are not its business.
 *
 * The path itself is judged by its record's owner and mode (as it was when deleted; without a record, the Home
 * owner's and git's mode, as the view showed it). A folder above it by what stands there: the branch's view while
 * the branch lives (the folder as it is now), else the folder's own deletion record (`rm -r` deleted it with
 * the path, or later), else main's tree (what a discarded branch forked from). A folder found nowhere hides
 * what was below it.
 */

/** A live branch view as this needs it: a folder's attributes (ENOENT when it is gone) and whose rights are shared. */
export interface LiveView {
  getattr(rel: string): Promise<Attr>;
  readonly share: OwnerShare;
}

export interface DeletedFrom {
  store: Store;
  /** main's tree now. */
  mainTree: string;
  /** The Home's owner: what has no record is its own. */
  owner: Owner;
  /** The open branch views by branch name. */
  views: Map<string, LiveView>;
  /** The recycle area (filed and pending), for the records of deleted folders. */
  records: TrashRecord[];
}

type Node = { mode: number; uid: number; gid: number };

const DEFAULT_MODE: Record<TrashKind, number> = {
  file: constants.S_IFREG | 0o644, exec: constants.S_IFREG | 0o755, dir: constants.S_IFDIR | 0o755, symlink: constants.S_IFLNK | 0o777,
};

export class DeletedAccess {
  /** Folders' attributes by branch and path, when they come from a live view or main (not from a record). */
  private readonly standing = new Map<string, Promise<Node | null>>();
  /** Deleted folders' records by branch and path, newest first. */
  private readonly deletedDirs = new Map<string, TrashRecord[]>();

  constructor(private readonly reader: Reader, private readonly from: DeletedFrom) {
    for (const r of from.records) {
      if (r.kind !== 'dir') continue;
      const key = `${r.branch}\0${r.path}`;
      this.deletedDirs.set(key, [...(this.deletedDirs.get(key) ?? []), r]);
    }
    // Oldest first: the deletion of a folder that took a path with it is the first at or after the path's own.
    for (const list of this.deletedDirs.values()) list.sort((a, b) => (a.deletedAt < b.deletedAt ? -1 : a.deletedAt > b.deletedAt ? 1 : 0));
  }

  async mayRead(r: TrashRecord): Promise<boolean> {
    const parts = r.path.split('/');
    for (let i = 0; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      const node = await this.folder(r, dir);
      if (!node || (node.mode & constants.S_IFMT) !== constants.S_IFDIR || !this.permits(r.branch, dir, node, 1)) return false;
    }
    if (r.kind === 'symlink') return true;
    const meta = r.meta ? parseMeta(r.meta) : null;
    const node = meta ? { mode: meta.mode, uid: meta.uid, gid: meta.gid } : { mode: DEFAULT_MODE[r.kind], ...this.from.owner };
    return this.permits(r.branch, r.path, node, 4);
  }

  /** A folder above a deleted path: where the branch has it now, else as deleted with it (or later), else main's. */
  private async folder(r: TrashRecord, dir: string): Promise<Node | null> {
    const view = this.from.views.get(r.branch);
    if (view) {
      const live = await this.cached(`${r.branch}\0${dir}`, async () => {
        const attr = await view.getattr(dir).catch(() => null);
        // The inbox's group bits show its ACL's mask; its own mode is its owner's alone (and, not knowing its
        // other bits, a folder inside it is judged as shared with no one: stricter than the mount, never looser).
        return attr && { mode: visibleMode(dir, attr.mode), uid: attr.uid, gid: attr.gid };
      });
      if (live) return live;
    }
    const deleted = this.deletedDirs.get(`${r.branch}\0${dir}`)?.find((d) => d.deletedAt >= r.deletedAt);
    if (deleted) {
      const meta = deleted.meta ? parseMeta(deleted.meta) : null;
      return meta ? { mode: meta.mode, uid: meta.uid, gid: meta.gid } : { mode: DEFAULT_MODE.dir, ...this.from.owner };
    }
    return this.cached(`\0main\0${dir}`, async () => {
      const { store, mainTree } = this.from;
      const entry = await store.lookupPath(mainTree, dir);
      if (entry?.mode !== MODE.tree) return null;
      const meta = await store.meta(mainTree, dir, MODE.tree);
      return { mode: fullMode(MODE.tree, meta), uid: meta?.uid ?? this.from.owner.uid, gid: meta?.gid ?? this.from.owner.gid };
    });
  }

  private cached(key: string, find: () => Promise<Node | null>): Promise<Node | null> {
    let known = this.standing.get(key);
    if (!known) this.standing.set(key, (known = find()));
    return known;
  }

  /** The kernel's check, a sharer of the branch's write leases carrying the owner's rights (owner-share.ts). */
  private permits(branch: string, rel: string, node: Node, want: number): boolean {
    const share = this.from.views.get(branch)?.share ?? new OwnerShare(this.from.owner);
    const st = { ...node, mode: visibleMode(rel, node.mode) };
    // Shared or not by its own mode, as the mount decides (owner-share.ts covers).
    const sharer = share.covers(node, inboxPlace(rel)) && share.sharers.includes(this.reader.uid);
    return permits(this.reader, sharer ? { ...st, uid: this.reader.uid } : st, want);
  }
}
