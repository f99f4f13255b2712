import fs from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { fsError } from '../../util/errors.js';
import { MODE, type Store } from '../../store/store.js';
import { kindOfMode, trashRecord, type TrashKind, type TrashRecord } from '../../trash/trash.js';
import { checkDirectoryMove, hasUnstorableName, isGitmodulesName } from '../../policy/policy.js';
import type { Committer } from './committer.js';
import type { CopyUp } from './copy-up.js';
import type { Deletions } from './deletions.js';
import { isDir, type Node, type Overlay } from './overlay.js';
import { parentOf } from './paths.js';
import type { BranchState } from './state.js';
import { overQuota } from './usage.js';
import type { DataPath } from './data-path.js';
import { makeSpecial } from './special-files.js';
import { exactMode, giveToCaller } from './ownership.js';
import type { Caller } from '../../util/owner.js';
import { formatMeta, type FileMeta } from '../../store/file-meta.js';

/**
 * The namespace operations of a branch view: mkdir, symlink, link, unlink, rmdir, rename. Versioned
 * deletions go through the deletion log (and on to the recycle area); scratch ones are plain unlinks.
 */
/**
 * A file a create made younger than this that no commit holds goes without a recycle record when deleted (birth
 * time; 0 where unknown): a tool's temporary file lives milliseconds, and anything a person or a second command
 * touched in between lived longer.
 */
const TRANSIENT_MS = 250;

export class Names {
  constructor(
    private readonly ctx: { store: Store; branch: string; runId?: string },
    private readonly overlay: Overlay,
    private readonly copy: CopyUp,
    private readonly deletions: Deletions,
    private readonly committer: Committer,
    private readonly state: Pick<BranchState, 'usage' | 'forget' | 'isDirty' | 'made'>,
    /** Descriptors open for writing follow the names they write to. */
    private readonly files: Pick<DataPath, 'moved' | 'settleAt'>,
  ) {}

  private trashRecord(rel: string, kind: TrashKind): TrashRecord {
    return trashRecord(rel, this.ctx.branch, kind, { run: this.ctx.runId });
  }

  /**
   * Keep in the record what git does not keep of rel (mode, owner, times), for a restore to give back: from the
   * upper directory, or the record git holds when the view shows git's copy (gitMode), if it has one.
   */
  private async keepMeta(record: TrashRecord, rel: string, gitMode?: number): Promise<void> {
    const meta = await this.metaOf(rel, gitMode);
    if (meta) record.meta = meta;
  }

  /** The metadata record's line for what the view shows at rel (gitMode: git's copy; undefined: look). */
  private async metaOf(rel: string, gitMode?: number): Promise<string | undefined> {
    let meta: FileMeta | null;
    const st = gitMode === undefined ? await this.overlay.statNs(rel) : null;
    if (st) meta = { mode: Number(st.mode), uid: Number(st.uid), gid: Number(st.gid), atimeNs: st.atimeNs, mtimeNs: st.mtimeNs };
    else meta = await this.overlay.layer.meta(rel, gitMode ?? MODE.tree);
    return meta ? formatMeta(meta).trim() : undefined;
  }

  /** A versioned deletion: logged first, then done, then committed within the window. */
  private async deleteLogged(prepare: Parameters<Deletions['record']>[0]): Promise<void> {
    await this.deletions.record(prepare);
    this.committer.schedule();
  }

  /** FIFOs, sockets and device nodes live in scratch only: git cannot hold them (policy says EPERM elsewhere). */
  async mknod(rel: string, mode: number, dev: number, caller?: Caller | null): Promise<void> {
    await this.overlay.check('mknod', rel);
    if (await this.overlay.resolve(rel)) throw fsError('EEXIST');
    // The parent may exist only in git: make it real first (the tool that makes the node reports no errno for it).
    await this.copy.directory(parentOf(rel));
    await this.overlay.tree.at(rel, async (p) => {
      await makeSpecial(p, mode, dev);
      await giveToCaller(p, caller);
    });
  }

  async mkdir(rel: string, mode: number, caller?: Caller | null): Promise<void> {
    await this.overlay.check('mkdir', rel);
    if (await this.overlay.resolve(rel)) throw fsError('EEXIST');
    await this.copy.withParent(rel, () => this.overlay.tree.at(rel, async (p) => {
      await fs.mkdir(p, mode & 0o7777);
      // Owner first: a chown clears setuid and setgid bits, so the exact mode comes after it.
      await giveToCaller(p, caller);
      await exactMode(p, mode);
    }));
    this.committer.markDirty(rel); // its metadata record
  }

  async symlink(target: string, rel: string, caller?: Caller | null): Promise<void> {
    await this.overlay.check('symlink', rel);
    if (await this.overlay.resolve(rel)) throw fsError('EEXIST');
    // A link holds its target's bytes (what lstat says its size is, and what a commit stores).
    const refusal = this.state.usage.resize(rel, Buffer.byteLength(target));
    if (refusal) throw fsError(refusal, `symlink ${rel} ${overQuota(this.state.usage)}`);
    await this.copy.counting(rel, () => this.copy.withParent(rel, () => this.overlay.tree.at(rel, async (p) => {
      await fs.symlink(target, p);
      await giveToCaller(p, caller);
    })));
    this.committer.markDirty(rel);
  }

  /** Hard links exist only in scratch: git cannot represent them. */
  async link(from: string, to: string): Promise<void> {
    await this.overlay.check('link', to);
    if (!(await this.overlay.scratchAt(from))) throw fsError('EPERM', 'hard links are only possible within scratch paths');
    // Each name counts as a file of its own (what it becomes if it moves into a versioned area: a copy), as a
    // restart counts it. A write through one name later counts at that name only, until a restart counts both.
    const node = await this.overlay.need(from);
    const refusal = this.state.usage.resize(to, node.stat?.size ?? 0);
    if (refusal) throw fsError(refusal, `link ${to} ${overQuota(this.state.usage)}`);
    await this.copy.counting(to, () => this.copy.withParent(to, () => this.overlay.tree.at2(from, to, (a, b) => fs.link(a, b))));
  }

  async unlink(rel: string): Promise<void> {
    await this.overlay.check('unlink', rel);
    if (await this.overlay.scratchAt(rel)) {
      const node = await this.overlay.need(rel);
      if (isDir(node)) throw fsError('EISDIR');
      await this.overlay.tree.at(rel, (p) => fs.unlink(p));
      this.files.settleAt(rel);
      this.state.usage.removed(rel);
      this.overlay.ignore.changed(rel);
      return;
    }
    // Looked up under the log lock, so a copy-up racing with the unlink cannot slip between the two.
    await this.deleteLogged(async () => {
      const node = await this.overlay.need(rel);
      if (isDir(node)) throw fsError('EISDIR');
      if (await this.transient(rel, node)) {
        return {
          entry: { type: 'whiteout', path: rel },
          act: async () => {
            await this.overlay.tree.at(rel, (p) => fs.unlink(p));
            this.files.settleAt(rel);
            this.state.usage.removed(rel);
            this.state.made.delete(rel);
          },
        };
      }
      const record = this.trashRecord(rel, node.stat ? kindOfStats(node.stat) : kindOfMode(node.entry.mode));
      await this.keepMeta(record, rel, node.entry?.mode);
      await this.deletions.passBegins(rel, record.deletedAt, (dir) => this.metaOf(dir));
      if (node.stat) record.size = node.stat.size;
      else {
        record.oid = node.entry.oid;
        record.size = await this.ctx.store.blobSize(node.entry.oid);
      }
      return {
        entry: { type: 'delete', record, whiteout: true, parked: !!node.stat },
        act: async () => {
          if (!node.stat) {
            // A copy-up that raced this unlink may have put the file in the upper directory since it was
            // looked up: the name goes (the copy-up itself checks again once it is in place).
            await this.overlay.tree.at(rel, (p) => fs.unlink(p)).catch(() => undefined);
            await this.copy.countAgain(rel);
            return;
          }
          // Parked for the recycle area, out of the upper directory: the branch no longer holds it.
          await this.overlay.tree.at(rel, (p) => fs.rename(p, this.deletions.parkedAt(record.id)));
          this.files.settleAt(rel);
          this.state.usage.removed(rel);
        },
      };
    });
  }

  async rmdir(rel: string): Promise<void> {
    await this.overlay.check('rmdir', rel);
    const scratch = await this.overlay.scratchAt(rel, true);
    const remove = async () => {
      const node = await this.overlay.need(rel);
      if (!isDir(node)) throw fsError('ENOTDIR');
      if ((await this.overlay.names(rel)).length > 0) throw fsError('ENOTEMPTY');
      return node;
    };
    if (scratch) {
      await remove();
      await this.overlay.tree.at(rel, (p) => fs.rmdir(p));
      return;
    }
    await this.deleteLogged(async () => {
      const node = await remove();
      const record = this.trashRecord(rel, 'dir');
      // As the folder was before the pass that emptied it began: deleting in it moved its times.
      const pass = this.deletions.passEnds(rel, record.deletedAt);
      record.since = pass.since;
      if (pass.meta) record.meta = pass.meta;
      else await this.keepMeta(record, rel, node.entry?.mode);
      await this.deletions.passBegins(rel, pass.since, (dir) => this.metaOf(dir));
      // An empty directory git never had (a `git clone` that stopped at .git, a tool's temporary directory) holds
      // nothing to restore: hidden from git as any deletion (a commit under way may be adding it), not recycled.
      const never = node.stat && !(await this.overlay.layer.lookup(rel));
      return {
        entry: never ? { type: 'whiteout', path: rel } : { type: 'delete', record, whiteout: true, parked: false },
        act: async () => {
          if (node.stat) await this.overlay.tree.at(rel, (p) => fs.rmdir(p));
        },
      };
    });
  }

  /**
   * A file a create made here less than 250 ms ago, that no commit took (a tool's `AGENTS.md.tmp`, made and
   * removed within one commit window): its deletion files nothing in the recycle area. A copy-up or a rename of an
   * older file is never made; one that lived longer is filed, committed or not (a log deleted while still open).
   */
  private async transient(rel: string, node: Node): Promise<boolean> {
    if (!this.state.made.has(rel) || !node.stat) return false;
    const age = Date.now() - node.stat.birthtimeMs;
    return age >= 0 && age < TRANSIENT_MS && !(await this.overlay.gitNode(rel));
  }

  /** Whether a file has another name, or a directory holds such a file (in the upper directory). */
  private async hardLinked(rel: string, dir: boolean, st: { nlink: number; isFile(): boolean } | null | undefined): Promise<boolean> {
    if (!dir) return !!st?.isFile() && st.nlink > 1;
    let linked = false;
    await this.overlay.walkUpper(rel, (_p, s) => {
      if (s.isFile() && s.nlink > 1) linked = true;
    });
    return linked;
  }

  async rename(from: string, to: string): Promise<void> {
    const src = await this.overlay.need(from);
    const dst = await this.overlay.resolve(to);
    await this.overlay.check('rename-from', from);
    await this.overlay.check('rename-to', to, dst !== null);
    if (from === to) return;
    if (to.startsWith(`${from}/`)) throw fsError('EINVAL');
    const srcDir = isDir(src);
    const fromScratch = await this.overlay.scratchAt(from, srcDir);
    if (dst) {
      const dstDir = isDir(dst);
      if (srcDir && !dstDir) throw fsError('ENOTDIR');
      if (!srcDir && dstDir) throw fsError('EISDIR');
      if (dstDir && (await this.overlay.names(to)).length > 0) throw fsError('ENOTEMPTY');
    }
    const toVersioned = !(await this.overlay.scratchAt(to, srcDir));
    // A FIFO, socket or device node may live in scratch only: git cannot hold one.
    if (toVersioned && src.stat && !srcDir && !src.stat.isFile() && !src.stat.isSymbolicLink()) {
      throw fsError('EPERM', `${from} is a special file, which cannot live in a versioned area`);
    }
    if (toVersioned && (srcDir || src.stat?.isSymbolicLink()) && isGitmodulesName(to.slice(to.lastIndexOf('/') + 1))) {
      throw fsError('EPERM', `${to} must be a file: git refuses a .gitmodules that is a directory or a link`);
    }
    if (srcDir) await this.copy.tree(from);
    else if (src.entry) await this.copy.file(from, src.entry);
    const recorded = srcDir ? await this.recordedDirs(from) : [];
    if (srcDir) {
      const below: string[] = [];
      await this.overlay.walkUpper(from, (p) => below.push(p.slice(from.length + 1)));
      const refusal = checkDirectoryMove(this.overlay.rules, from, to, below);
      if (refusal) throw fsError(refusal, `moving ${from} to ${to} would move protected paths`);
      const unstorable = toVersioned ? below.find(hasUnstorableName) : undefined;
      if (unstorable !== undefined) {
        throw fsError('EPERM', `${from} contains ${unstorable}, a name git (or the Store's metadata) cannot hold in a versioned area: keep repositories under workspace/`);
      }
    }
    // A hard-linked file is one file under two names, which git cannot keep: into a versioned area it moves as
    // a copy (EXDEV makes mv copy), so writing through the other name cannot change what is committed.
    if (toVersioned && fromScratch && (await this.hardLinked(from, srcDir, src.stat))) {
      throw fsError('EXDEV', `${from} is hard-linked; it moves into a versioned area as a copy`);
    }
    // Hide git's copy of the source (a commit under way may be adding it), and of a directory replaced at
    // the target (its contents were all deleted). Logged before the rename, as deletions are.
    const dstGit = dst ? await this.overlay.gitNode(to) : null;
    const hide = [fromScratch ? null : from, dstGit && isDir(dstGit) ? to : null].filter((p): p is string => p !== null);
    if (hide.length) await this.deletions.hide(hide);
    try {
      await this.copy.withParent(to, () => this.overlay.tree.at2(from, to, (a, b) => fs.rename(a, b)));
    } catch (e) {
      // The source stays where it was, in the upper directory: commit it again over its whiteout.
      await this.markMoved(from, srcDir, recorded);
      throw e;
    }
    // What was counted at `to` (a file written over) is gone; what was at `from` is counted there now.
    this.files.settleAt(from, srcDir);
    this.files.settleAt(to, true);
    this.state.usage.renamed(from, to, srcDir);
    this.madeMoved(from, to);
    this.files.moved(from, to);
    this.state.forget(from, true);
    this.overlay.ignore.changed(from, srcDir);
    this.overlay.ignore.changed(to, srcDir);
    if (toVersioned) await this.markMoved(to, srcDir, recorded);
    this.committer.schedule();
  }

  /** What a create made moves with its name; what was at `to` before is gone (a rename of an older file is not made). */
  private madeMoved(from: string, to: string): void {
    const { made } = this.state;
    const under = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);
    const moving = [...made].filter((p) => under(p, from));
    for (const p of [...made]) if (under(p, to) || under(p, from)) made.delete(p);
    for (const p of moving) made.add(to + p.slice(from.length));
  }

  /** rel and the directories below it that have a metadata record, committed or pending (relative to rel: '' is rel). */
  private async recordedDirs(rel: string): Promise<string[]> {
    const dirs = [rel];
    await this.overlay.walkUpper(rel, (p, st) => st.isDirectory() && dirs.push(p));
    const has = await Promise.all(dirs.map(async (d) => this.state.isDirty(d) || (await this.overlay.layer.meta(d, MODE.tree)) !== null));
    return dirs.filter((_, i) => has[i]).map((d) => d.slice(rel.length + 1));
  }

  /** What a rename moved, to be committed at rel: a file, or a directory's files and the directories that had a record. */
  private async markMoved(rel: string, dir: boolean, recorded: string[]): Promise<void> {
    if (!dir) return this.committer.markDirty(rel);
    await this.overlay.walkUpper(rel, (p, st) => !st.isDirectory() && this.committer.markDirty(p));
    for (const d of recorded) this.committer.markDirty(d === '' ? rel : `${rel}/${d}`);
  }
}

function kindOfStats(st: Stats): TrashKind {
  if (st.isSymbolicLink()) return 'symlink';
  return st.mode & 0o100 ? 'exec' : 'file';
}
