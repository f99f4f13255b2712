import type { CommitInfo, Entry, Store } from '../store/store.js';
import { EMPTY_TREE, GITLINK, MODE } from '../store/store.js';
import { isMetaPath, META_ROOT, permsOf, type FileMeta } from '../store/file-meta.js';
import { gitRefusesName } from '../policy/policy.js';
import { attrFromGit, type Attr, type Owner } from './attr.js';

/** What a view shows for a gitlink: an empty folder, read-only (nothing written there could be the submodule's). */
const SUBMODULE_FOLDER: Entry = Object.freeze({ oid: EMPTY_TREE, mode: MODE.tree });

/**
 * Read access to one commit's tree: the lower layer of every view. Nothing is materialised on disk.
 * A path without a metadata record shows the time of its last change as of this commit (the Store's
 * last-change lookup), never the commit's own: an unrelated merge leaves it alone. `time` is the view's own
 * time, for what git does not hold (a scratch root main shows empty).
 *
 * What history may hold but no view serves: a name git treats as `.git` (in any spelling) is not there at all,
 * since root's git run anywhere below would take it for a repository and do what its config says; a gitlink
 * (a submodule's commit, which is not in this Store) is an empty read-only folder, as git leaves one unchecked out.
 */
export class GitLayer {
  constructor(readonly store: Store, readonly commit: CommitInfo, readonly time = new Date(commit.time * 1000)) {}

  /** The entry at rel; metadata records are the Store's, never a view's. */
  async lookup(rel: string): Promise<Entry | null> {
    if (isMetaPath(rel) || rel.split('/').some(gitRefusesName)) return null;
    const entry = await this.store.lookupPath(this.commit.tree, rel);
    return entry?.mode === GITLINK ? SUBMODULE_FOLDER : entry;
  }

  /** A path's attributes: git's mode, the Home's owner and time, unless the path's metadata record says more. */
  async attr(rel: string, entry: Entry, owner: Owner, ino?: number): Promise<Attr> {
    const size = entry.mode === MODE.tree ? 0 : await this.store.blobSize(entry.oid);
    // A record's times win: the history walk for the last change is only for paths without one.
    const meta = await this.meta(rel, entry.mode);
    const attr = attrFromGit(entry.mode, size, meta ? this.time : await this.timeOf(rel), owner, ino);
    if (entry.oid === EMPTY_TREE) attr.mode &= ~0o222;
    if (meta) {
      // The record's permissions (a symlink's are always 0777), owner and times; the type stays git's.
      if (entry.mode !== MODE.link) attr.mode = (attr.mode & ~0o7777) | (entry.mode === MODE.tree ? meta.mode & 0o7777 : permsOf(meta, entry.mode === MODE.exec));
      Object.assign(attr, { uid: meta.uid, gid: meta.gid, atimeNs: meta.atimeNs, mtimeNs: meta.mtimeNs, ctimeNs: meta.mtimeNs });
    }
    return attr;
  }

  /** When rel last changed as of this commit (what a path without a record shows as its times). */
  async timeOf(rel: string): Promise<Date> {
    const seconds = await this.store.lastChange.timeOf(this.commit.oid, rel);
    return seconds === null ? this.time : new Date(seconds * 1000);
  }

  /** The metadata record kept in this commit for rel, which git holds with gitMode, if any. */
  meta(rel: string, gitMode: number): Promise<FileMeta | null> {
    return this.store.meta(this.commit.tree, rel, gitMode);
  }

  async names(entry: Entry): Promise<string[]> {
    if (entry.oid === EMPTY_TREE) return [];
    const names = [...(await this.store.readTree(entry.oid)).keys()].filter((n) => !gitRefusesName(n));
    return entry.oid === this.commit.tree ? names.filter((n) => n !== META_ROOT) : names;
  }

  async content(entry: Entry): Promise<Buffer> {
    return this.store.readBlob(entry.oid);
  }
}
