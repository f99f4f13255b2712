import fs from 'node:fs/promises';
import { constants } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fsError, hasCode } from '../../util/errors.js';
import { MODE, type Entry, type Store } from '../../store/store.js';
import type { TrashKind } from '../../trash/trash.js';
import { isDir, type Node, type Overlay } from './overlay.js';
import { join, parentOf } from './paths.js';
import type { ReadManifest } from './read-manifest.js';
import type { BranchState } from './state.js';
import { overQuota } from './usage.js';
import { giveToOwner } from './ownership.js';
import { chmodNoFollow } from '../../util/beneath.js';
import { writeFileExact } from '../../util/exact-mode.js';
import { setTimes } from '../fsx.js';
import { permsOf, type FileMeta } from '../../store/file-meta.js';
import type { Owner } from '../../util/owner.js';

/**
 * Bringing what exists only in git into the upper directory, and placing new content there: always written
 * beside (in tmp/) and then linked or renamed into place, so a crash never leaves half a file.
 */
export class CopyUp {
  private readonly copying = new Map<string, Promise<void>>();

  constructor(
    private readonly overlay: Overlay,
    private readonly store: Store,
    private readonly tmp: string,
    private readonly reads: () => ReadManifest,
    /** Bytes brought up count against the quota; an unlink racing a copy-up hides git's copy. */
    private readonly state: Pick<BranchState, 'usage' | 'hidden'>,
    /** Who owns what the daemon brings up: the Home's owner (git keeps no owners). */
    private readonly owner: () => Owner,
  ) {}

  /** Run fn; if it fails because the parent exists only in git, create the parent in the upper directory and retry. */
  async withParent<T>(rel: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (!hasCode(e, 'ENOENT')) throw e;
    }
    await this.directory(parentOf(rel));
    return fn();
  }

  /**
   * Make directory rel in the upper directory, with every ancestor that exists only in git, each as the view
   * showed it: its record's mode, owner and times (set deepest first, as making a child moves its parent's
   * times), else the Home's owner. A directory someone else made meanwhile is left as they made it.
   */
  async directory(rel: string): Promise<void> {
    const missing: string[] = [];
    let existing = rel;
    for (; !(await this.overlay.statNs(existing)); existing = parentOf(existing)) missing.unshift(existing);
    if (missing.length === 0) return;
    const tree = this.overlay.tree;
    // Bringing a directory up changes no listing: the directory it is made in keeps its modification time.
    const { mtimeNs } = await this.atOrRoot(existing, (p) => fs.lstat(p, { bigint: true }));
    const made: string[] = [];
    for (const d of missing) {
      try {
        await tree.at(d, (p) => fs.mkdir(p, 0o755));
        made.push(d);
      } catch (e) {
        if (!hasCode(e, 'EEXIST')) throw e;
      }
    }
    for (const d of made.reverse()) {
      const git = await this.overlay.gitNode(d);
      await tree.at(d, (p) => this.applyRecord(d, p, git?.entry?.mode === MODE.tree ? MODE.tree : null));
    }
    if (made.includes(missing[0])) await this.atOrRoot(existing, async (p) => setTimes(p, 'omit', mtimeNs));
  }

  /** fn on rel's name in the upper directory held open, or on the upper directory itself ('' has no parent). */
  private atOrRoot<T>(rel: string, fn: (path: string) => Promise<T>): Promise<T> {
    return rel === '' ? fn(this.overlay.upper) : this.overlay.tree.at(rel, fn);
  }

  /**
   * Give what the daemon brings up at `file` the record git keeps for rel (mode, owner, times), or else the
   * view's owner (git keeps no owners). gitMode null: git has nothing there. `file` is in tmp/ or a name in a
   * directory held open: nothing here follows a link.
   */
  private async applyRecord(rel: string, file: string, gitMode: number | null): Promise<void> {
    const meta = gitMode === null ? null : await this.overlay.layer.meta(rel, gitMode);
    if (!meta || gitMode === null) {
      await giveToOwner(file, this.owner());
      // The mode git shows (nasd's own umask took some of it at creation).
      if (gitMode !== MODE.link) await chmodNoFollow(file, gitMode === MODE.file ? 0o644 : 0o755);
      // What git has without a record shows the time it last changed (git-layer.ts): the copy keeps showing it.
      if (gitMode !== null) {
        const shown = BigInt((await this.overlay.layer.timeOf(rel)).getTime()) * 1_000_000n;
        setTimes(file, shown, shown);
      }
      return;
    }
    await applyMeta(file, meta, gitMode);
  }

  /** An empty upper file where git has one (a truncation to nothing needs no copy). */
  async createEmpty(rel: string): Promise<void> {
    await this.withParent(rel, () => this.overlay.tree.at(rel, async (p) => {
      const made = await fs.open(p, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644).catch((e) => {
        if (!hasCode(e, 'EEXIST')) throw e;
        return null;
      });
      // Made here: 0644 exactly, whatever nasd's umask took. One a writer made meanwhile is only emptied.
      const fh = made ?? (await fs.open(p, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW));
      try {
        if (made) await fh.chmod(0o644);
      } finally {
        await fh.close();
      }
      this.state.usage.set(rel, 0);
      await giveToOwner(p, this.owner());
    }));
  }

  /** Bring a file, symlink or directory that exists only in git into the upper directory. */
  async materialise(rel: string, node: Node): Promise<void> {
    if (node.stat) return;
    if (node.entry.mode === MODE.tree) await this.directory(rel);
    else await this.file(rel, node.entry);
  }

  /** Copy a git file into the upper directory (once, however many callers race); returns its size. */
  async file(rel: string, entry: Entry): Promise<number> {
    let running = this.copying.get(rel);
    if (!running) {
      running = this.copy(rel, entry).finally(() => this.copying.delete(rel));
      this.copying.set(rel, running);
    }
    await running;
    return this.store.blobSize(entry.oid);
  }

  private async copy(rel: string, entry: Entry): Promise<void> {
    // A copy in the upper directory is read from there, unrecorded: count the copy as the read.
    await this.reads().record(rel, entry.oid);
    const data = await this.overlay.layer.content(entry);
    // Counted before it is made (so no other change takes the same room), and counted again if it fails.
    const refusal = this.state.usage.resize(rel, data.length);
    if (refusal) throw fsError(refusal, `${rel}: copying its ${data.length} bytes from git into the branch ${overQuota(this.state.usage)}`);
    const tmp = this.tmpName();
    try {
      if (entry.mode === MODE.link) await fs.symlink(data.toString(), tmp);
      else await writeFileExact(tmp, data, entry.mode === MODE.exec ? 0o755 : 0o644);
      // The copy is the file as the view showed it: its recorded mode, owner and times.
      await this.applyRecord(rel, tmp, entry.mode);
      const dir = parentOf(rel);
      await this.directory(dir);
      // A copy-up changes no listing: the directory keeps its modification time (a create racing this one
      // between the two calls would lose its own change of that time, nothing else).
      const { mtimeNs } = await this.atOrRoot(dir, (p) => fs.lstat(p, { bigint: true }));
      // link, not rename: if a writer got there first, its file stays and this copy is dropped.
      try {
        await this.withParent(rel, () => this.overlay.tree.at(rel, (p) => fs.link(tmp, p)));
        await this.atOrRoot(dir, async (p) => setTimes(p, 'omit', mtimeNs));
      } catch (e) {
        if (!hasCode(e, 'EEXIST')) throw e;
        // The writer's file stays: it is what counts at rel.
        await this.countAgain(rel);
      }
    } catch (e) {
      await this.countAgain(rel).catch(() => undefined);
      throw e;
    } finally {
      await fs.unlink(tmp).catch((e) => {
        if (!hasCode(e, 'ENOENT')) throw e;
      });
    }
    // An unlink of rel that ran while this copy was made has hidden git's copy: the copy must not bring it back.
    if (this.state.hidden(rel)) {
      await this.overlay.tree.at(rel, (p) => fs.unlink(p)).catch(() => undefined);
      await this.countAgain(rel);
      throw fsError('ENOENT', `${rel} was deleted while it was being copied up`);
    }
  }

  /** Copy a whole directory up, so that renaming it moves everything it shows. */
  async tree(rel: string): Promise<void> {
    await this.directory(rel);
    for (const name of await this.overlay.names(rel)) {
      const child = join(rel, name);
      const node = await this.overlay.resolve(child);
      if (!node) continue;
      if (isDir(node)) await this.tree(child);
      else if (node.entry) await this.file(child, node.entry);
    }
  }

  /**
   * Write content to a temporary file, then move it into the upper directory: readers never see half of it.
   * `replace`: over whatever file is there (rename); else only where nothing is (link: EEXIST otherwise).
   */
  async place(rel: string, kind: Exclude<TrashKind, 'dir'>, content: Buffer, replace = true, meta?: FileMeta | null): Promise<void> {
    // Counted before it is placed, as what replaces whatever is counted at rel now; counted again if it fails.
    const refusal = this.state.usage.resize(rel, content.length);
    if (refusal) throw fsError(refusal, `${rel}: its ${content.length} bytes ${overQuota(this.state.usage)}`);
    const tmp = this.tmpName();
    try {
      if (kind === 'symlink') await fs.symlink(content.toString(), tmp);
      else await writeFileExact(tmp, content, kind === 'exec' ? 0o755 : 0o644);
      try {
        // A restored file gets back its recorded mode, owner and times; what has no record is the Home owner's.
        if (meta) await applyMeta(tmp, meta, gitModeOfKind(kind));
        else await giveToOwner(tmp, this.owner());
        await this.withParent(rel, () => this.overlay.tree.at(rel, (p) => (replace ? fs.rename(tmp, p) : fs.link(tmp, p))));
      } finally {
        if (!replace) await fs.unlink(tmp).catch(() => undefined);
      }
    } catch (e) {
      if (replace) await fs.unlink(tmp).catch(() => undefined);
      await this.countAgain(rel).catch(() => undefined);
      throw e;
    }
  }

  /** A change of rel counted before it was made: if it fails, rel is counted again as the disk has it. */
  async counting<T>(rel: string, change: () => Promise<T>): Promise<T> {
    try {
      return await change();
    } catch (e) {
      await this.countAgain(rel).catch(() => undefined);
      throw e;
    }
  }

  /** Count rel as the upper directory holds it now (after a change that did not happen as counted). */
  async countAgain(rel: string): Promise<void> {
    const st = await this.overlay.statNs(rel);
    this.state.usage.set(rel, st && !st.isDirectory() ? Number(st.size) : null);
  }

  /** Give directory rel of the upper directory a record's mode, owner and times (by name in its parent held open). */
  async dirMeta(rel: string, meta: FileMeta): Promise<void> {
    await this.overlay.tree.at(rel, (p) => applyMeta(p, meta, MODE.tree));
  }

  /** A name in tmp/ (root's own): what is made there is only then moved into the upper directory. */
  private tmpName(): string {
    return `${this.tmp}/${randomBytes(6).toString('hex')}`;
  }
}

const gitModeOfKind = (kind: Exclude<TrashKind, 'dir'>): number => (kind === 'symlink' ? MODE.link : kind === 'exec' ? MODE.exec : MODE.file);

/**
 * Give `file` (in tmp/, or a name in a directory held open: nothing here follows a link) a record's owner, mode
 * and times, as what git holds with gitMode. Owner first: a chown clears setuid and setgid bits.
 */
async function applyMeta(file: string, meta: FileMeta, gitMode: number): Promise<void> {
  await fs.lchown(file, meta.uid, meta.gid);
  if (gitMode === MODE.tree) await chmodNoFollow(file, meta.mode & 0o7777);
  else if (gitMode !== MODE.link) await chmodNoFollow(file, permsOf(meta, gitMode === MODE.exec));
  setTimes(file, meta.atimeNs, meta.mtimeNs);
}
