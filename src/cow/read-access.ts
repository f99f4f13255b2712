import { MODE, type Store } from '../store/store.js';
import { fullMode } from '../store/file-meta.js';
import { gitRefusesName, permits, visibleMode, type Reader } from '../policy/policy.js';
import { inboxPlace, type OwnerShare } from './owner-share.js';

/**
 * Whether a reader could read a path of a commit's tree through a view, as the kernel would decide it from
 * what the view reports (attr.ts, git-layer.ts): search on every folder above it, read on it (a symlink's
 * target needs only the search). Owners and modes come from the tree's metadata records; what has none shows
 * the Home's owner, whose rights a branch's write-lease principals share (owner-share.ts); the inbox is its
 * owner's only (visibleMode). For the control API's answers that carry file content: they show what the mount
 * would, no more.
 */
export class ReadAccess {
  /** Per tree and folder: whether the reader may search it (and every folder above it). */
  private readonly folders = new Map<string, Promise<boolean>>();

  constructor(private readonly store: Store, private readonly share: OwnerShare, private readonly reader: Reader) {}

  async mayRead(tree: string, rel: string): Promise<boolean> {
    // A `.git` in history is not in any view (git-layer.ts).
    if (rel.split('/').some(gitRefusesName)) return false;
    const entry = await this.store.lookupPath(tree, rel);
    if (!entry) return false;
    const slash = rel.lastIndexOf('/');
    if (!(await this.maySearch(tree, slash < 0 ? '' : rel.slice(0, slash)))) return false;
    return entry.mode === MODE.link || (await this.permits(tree, rel, entry, 4));
  }

  private maySearch(tree: string, dir: string): Promise<boolean> {
    const key = `${tree}\0${dir}`;
    let known = this.folders.get(key);
    if (!known) {
      known = (async () => {
        const slash = dir.lastIndexOf('/');
        if (dir !== '' && !(await this.maySearch(tree, slash < 0 ? '' : dir.slice(0, slash)))) return false;
        const entry = await this.store.lookupPath(tree, dir);
        return entry?.mode === MODE.tree && (await this.permits(tree, dir, entry, 1));
      })();
      this.folders.set(key, known);
    }
    return known;
  }

  private async permits(tree: string, rel: string, entry: { oid: string; mode: number }, want: number): Promise<boolean> {
    const meta = await this.store.meta(tree, rel, entry.mode);
    const own = { mode: fullMode(entry.mode, meta), uid: meta?.uid ?? this.share.owner.uid, gid: meta?.gid ?? this.share.owner.gid };
    const st = { ...own, mode: visibleMode(rel, own.mode) };
    // A sharer's named ACL entry carries the owner's rights.
    const sharer = this.share.covers(own, inboxPlace(rel)) && this.share.sharers.includes(this.reader.uid);
    return permits(this.reader, sharer ? { ...st, uid: this.reader.uid } : st, want);
  }
}
