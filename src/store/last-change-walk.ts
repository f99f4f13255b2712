import { MODE, type CommitInfo, type Entry, type Tree } from './types.js';

/** What the lookup reads from the object store (the Store, whose tree cache it shares). */
export interface CommitReader {
  readCommit(oid: string): Promise<CommitInfo>;
  readTree(oid: string): Promise<Tree>;
  lookupPath(root: string, path: string): Promise<Entry | null>;
}

/** Directories whose entries' times are kept (per commit); each costs a map of its names. */
const MAX_DIRS = 4096;
/** Commits whose parents, tree and time are kept: one walk reads each at most once. */
const MAX_COMMITS = 16384;

/**
 * When each path last changed, as of any commit, where git could not make a ChangeTable (see last-change.ts): the time of the newest commit on the first-parent line whose
 * tree holds something else at that path than its first parent's (a merge counts as the change it brought
 * into that line). Unrelated commits leave a path's time alone, so `make` and `rsync` see no change where
 * there was none.
 *
 * Worked out a directory at a time, lazily (on the first getattr of a name in it), and kept per (commit,
 * directory), least recently used first out: the walk steps over commits that left the directory's tree as it
 * was at the cost of one tree lookup, and stops at the first commit whose answer for that directory is known
 * already, so after a merge only the commits since the last head are read.
 */
export class LastChangeWalk {
  private readonly dirs = new Map<string, Promise<Map<string, number>>>();
  private readonly commits = new Map<string, Promise<CommitInfo>>();

  constructor(private readonly store: CommitReader) {}

  /** Seconds since the epoch at which commit `oid` was made (read once, kept with the walk's commits). */
  async commitTime(oid: string): Promise<number> {
    return (await this.commit(oid)).time;
  }

  /** Seconds since the epoch at which `rel` last changed as of commit `oid`; null where it is not in that commit. */
  async timeOf(oid: string, rel: string): Promise<number | null> {
    if (rel === '') return this.commitTime(oid);
    const slash = rel.lastIndexOf('/');
    const times = await this.dir(oid, slash < 0 ? '' : rel.slice(0, slash));
    return times.get(slash < 0 ? rel : rel.slice(slash + 1)) ?? null;
  }

  private dir(oid: string, dir: string): Promise<Map<string, number>> {
    const key = `${oid}\0${dir}`;
    let p = this.dirs.get(key);
    if (p) {
      this.dirs.delete(key);
      this.dirs.set(key, p);
      return p;
    }
    p = this.walk(oid, dir);
    p.catch(() => this.dirs.delete(key));
    this.dirs.set(key, p);
    if (this.dirs.size > MAX_DIRS) this.dirs.delete(this.dirs.keys().next().value!);
    return p;
  }

  private async walk(oid: string, dir: string): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    let cur = await this.commit(oid);
    let here = await this.store.lookupPath(cur.tree, dir);
    if (!here || here.mode !== MODE.tree) return out;
    // The names whose entry has been the same from `oid` down to `cur`, with that entry.
    const pending = new Map<string, Entry>(await this.store.readTree(here.oid));
    while (pending.size > 0) {
      const known = cur.oid !== oid ? this.dirs.get(`${cur.oid}\0${dir}`) : undefined;
      if (known) {
        const times = await known;
        for (const name of pending.keys()) out.set(name, times.get(name) ?? cur.time);
        break;
      }
      const parentOid = cur.parents[0];
      if (!parentOid) {
        for (const name of pending.keys()) out.set(name, cur.time);
        break;
      }
      const parent = await this.commit(parentOid);
      const there = await this.store.lookupPath(parent.tree, dir);
      if (there?.oid !== here.oid) {
        const before = there?.mode === MODE.tree ? await this.store.readTree(there.oid) : new Map<string, Entry>();
        for (const [name, e] of pending) {
          const b = before.get(name);
          if (b?.oid === e.oid && b.mode === e.mode) continue;
          out.set(name, cur.time);
          pending.delete(name);
        }
      }
      if (!there || there.mode !== MODE.tree) {
        for (const name of pending.keys()) out.set(name, cur.time);
        break;
      }
      cur = parent;
      here = there;
    }
    return out;
  }

  /** A commit's parents, tree and time, without its message. */
  commit(oid: string): Promise<CommitInfo> {
    let p = this.commits.get(oid);
    if (!p) {
      p = this.store.readCommit(oid).then((c) => ({ ...c, message: '' }));
      p.catch(() => this.commits.delete(oid));
      this.commits.set(oid, p);
      if (this.commits.size > MAX_COMMITS) this.commits.delete(this.commits.keys().next().value!);
    }
    return p;
  }
}
