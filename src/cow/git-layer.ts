import type { CommitInfo, Entry, Store } from '../store/store.js';
import { MODE } from '../store/store.js';
import { attrFromGit, type Attr, type Owner } from './attr.js';

/**
 * Read access to one commit's tree: the lower layer of every view. Nothing is materialised on disk.
 * `time` is what unchanged files show as their times: by default the commit's.
 */
export class GitLayer {
  constructor(readonly store: Store, readonly commit: CommitInfo, readonly time = new Date(commit.time * 1000)) {}

  lookup(rel: string): Promise<Entry | null> {
    return this.store.lookupPath(this.commit.tree, rel);
  }

  async attr(entry: Entry, owner: Owner, ino?: number): Promise<Attr> {
    const size = entry.mode === MODE.tree ? 0 : await this.store.blobSize(entry.oid);
    return attrFromGit(entry.mode, size, this.time, owner, ino);
  }

  async names(entry: Entry): Promise<string[]> {
    return [...(await this.store.readTree(entry.oid)).keys()];
  }

  async content(entry: Entry): Promise<Buffer> {
    return this.store.readBlob(entry.oid);
  }
}
