import fs from 'node:fs/promises';
import { constants, type Stats } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { fsError, hasCode } from '../../util/errors.js';
import { MODE, type Entry, type Identity, type Store } from '../../store/store.js';
import { kindOfMode, trashRecord, type Trash, type TrashKind, type TrashRecord } from '../../trash/trash.js';
import {
  checkAppend, checkDirectoryMove, checkMutation, checkOpenForWrite, checkQuota, isAppendOnly, isScratch, type Mutation, type Rules,
} from '../../policy/policy.js';
import { attrFromStats, gitModeOf, isInbox, type Attr, type Owner } from '../attr.js';
import { GitLayer } from '../git-layer.js';
import { Flusher } from './flusher.js';
import { PendingLog, type PendingEntry } from './pending-log.js';
import * as fsx from '../fsx.js';
import { ReadManifest } from './read-manifest.js';
import { mapLimit } from '../../util/concurrency.js';
import { branchRef } from '../../store/refs.js';
import type { Handle, View } from '../view.js';

export interface BranchContext {
  role: string;
  branch: string;
  store: Store;
  trash: Trash;
  identity: Identity;
  owner: Owner;
  rules: Rules;
  quotaBytes: number;
  runId?: string;
  /** The branch's own directory in the Store: upper/, deleted/, tmp/, pending.jsonl. */
  dir: string;
  /** Batching window for commits. */
  windowMs: number;
  log: Logger;
}

/** A path as the view sees it: in the upper directory (stat) or only in git (entry). */
type Node = { stat: Stats; entry?: undefined } | { entry: Entry; stat?: undefined };

const isDir = (n: Node) => (n.stat ? n.stat.isDirectory() : n.entry.mode === MODE.tree);
const join = (dir: string, name: string) => (dir === '' ? name : `${dir}/${name}`);
const parentOf = (rel: string) => rel.slice(0, Math.max(0, rel.lastIndexOf('/')));
const OPEN_FLAGS = 3 | constants.O_APPEND | constants.O_TRUNC;

/**
 * libfuse 2 keeps an unlinked file that is still open by renaming it to `.fuse_hidden<n>` and unlinks that
 * name at the last close. Such names are the deleted file's last moments: never committed, never filed.
 */
const isFuseHidden = (rel: string) => rel.slice(rel.lastIndexOf('/') + 1).startsWith('.fuse_hidden');

/**
 * A writable branch of a Home: the branch's head commit in git, overlaid by an upper directory of files
 * written since, minus whiteouts for what was deleted. Unchanged files are served from git objects; the
 * first write copies a file up. Closed and fsynced files become commits through the flusher; scratch paths
 * (workspace/) stay in the upper directory only.
 */
export class BranchView implements View {
  readonly kind = 'branch' as const;
  readonly name: string;
  private layer!: GitLayer;
  private readonly upper: string;
  private readonly parked: string;
  private readonly tmp: string;
  private readonly pending: PendingLog;
  private readonly flusher: Flusher;
  /** What the run read from git through this view (SPEC.md, Agent Branch, requirement 4). */
  reads!: ReadManifest;
  /** Paths hidden from git, with the generation that hid them. */
  private readonly whiteouts = new Map<string, number>();
  /** Versioned paths whose upper content is not committed yet. */
  private readonly dirty = new Map<string, number>();
  /** Deletions waiting to reach the recycle area. */
  private readonly deletions: Extract<PendingEntry, { type: 'delete' }>[] = [];
  private readonly copying = new Map<string, Promise<void>>();
  /** Handles open for writing, so that sync can include what they wrote before their release arrives. */
  private readonly writers = new Set<Handle>();
  private gen = 0;
  private usedBytes = 0;
  private logLock: Promise<unknown> = Promise.resolve();

  private readonly defaults: { owner: Owner; quotaBytes: number };

  private constructor(private readonly ctx: BranchContext) {
    this.name = `${ctx.role}@${ctx.branch}`;
    this.defaults = { owner: ctx.owner, quotaBytes: ctx.quotaBytes };
    this.upper = `${ctx.dir}/upper`;
    this.parked = `${ctx.dir}/deleted`;
    this.tmp = `${ctx.dir}/tmp`;
    this.pending = new PendingLog(`${ctx.dir}/pending.jsonl`);
    this.flusher = new Flusher(() => this.commitPending(), ctx.windowMs, (err) =>
      ctx.log.error({ err, view: this.name }, 'commit failed; changes kept on disk, will retry'),
    );
  }

  /** Open a branch view, recovering what a crash left: uncommitted upper files and pending deletions. */
  static async open(ctx: BranchContext, scratchRoots: string[]): Promise<BranchView> {
    const view = new BranchView(ctx);
    for (const d of [view.upper, view.parked, view.tmp]) await fs.mkdir(d, { recursive: true });
    for (const s of scratchRoots) await fs.mkdir(`${view.upper}/${s}`, { recursive: true });
    await fs.rm(view.tmp, { recursive: true, force: true });
    await fs.mkdir(view.tmp);
    const head = await ctx.store.readRef(branchRef(ctx.branch));
    if (!head) throw new Error(`branch ${ctx.branch} has no ref in ${ctx.store.path}`);
    view.layer = new GitLayer(ctx.store, await ctx.store.readCommit(head));
    view.reads = await ReadManifest.open(`${ctx.dir}/reads.jsonl`);
    await view.recover();
    return view;
  }

  get head(): string {
    return this.layer.commit.oid;
  }

  /**
   * The write lease in force, or none: its principal owns the view's files (the kernel's permission check
   * then keeps other users out) and its budget caps the branch's quota.
   */
  setLease(lease: { owner: Owner | null; budgetBytes?: number } | null): void {
    this.ctx.owner = lease?.owner ?? this.defaults.owner;
    this.ctx.quotaBytes = Math.min(this.defaults.quotaBytes, lease?.budgetBytes ?? Infinity);
  }

  get owner(): Owner {
    return this.ctx.owner;
  }

  /** The run the branch was created for (--run), if any. */
  get run(): string | undefined {
    return this.ctx.runId;
  }

  get quota(): { used: number; limit: number } {
    return { used: this.usedBytes, limit: this.ctx.quotaBytes };
  }

  get pendingChanges(): number {
    return this.dirty.size + this.whiteouts.size + this.deletions.length;
  }

  private async recover(): Promise<void> {
    const referenced = new Set<string>();
    for (const e of await this.pending.load()) {
      if (e.type === 'whiteout') {
        this.whiteouts.set(e.path, ++this.gen);
        continue;
      }
      if (e.parked) {
        const parked = await exists(`${this.parked}/${e.record.id}`);
        // Logged but never parked: the unlink did not complete and the file is still in place.
        if (!parked) continue;
        referenced.add(e.record.id);
      }
      this.deletions.push(e);
      if (e.whiteout) this.whiteouts.set(e.record.path, ++this.gen);
    }
    for (const name of await fs.readdir(this.parked)) {
      if (!referenced.has(name)) await fs.rm(`${this.parked}/${name}`, { force: true });
    }
    const leftovers: string[] = [];
    await this.walkUpper('', (rel, st) => {
      // Files unlinked while open are gone once the mount that kept them open is gone.
      if (isFuseHidden(rel)) leftovers.push(rel);
      else {
        this.usedBytes += st.isDirectory() ? 0 : st.size;
        if (!st.isDirectory() && !this.scratch(rel)) this.dirty.set(rel, ++this.gen);
      }
    });
    for (const rel of leftovers) await fs.rm(this.up(rel), { force: true });
    if (this.pendingChanges > 0) {
      this.ctx.log.info({ view: this.name, paths: this.dirty.size, deletions: this.deletions.length }, 'recovering uncommitted changes');
      this.flusher.schedule(0);
    }
  }

  // ---- resolution --------------------------------------------------------------------------------

  private up(rel: string): string {
    return rel === '' ? this.upper : `${this.upper}/${rel}`;
  }

  private scratch(rel: string): boolean {
    return isScratch(this.ctx.rules, rel);
  }

  /** Whether git's version of rel is hidden: rel or one of its ancestors was deleted in this branch. */
  private hidden(rel: string): boolean {
    if (this.whiteouts.size === 0) return false;
    for (let p = rel; p !== ''; p = parentOf(p)) if (this.whiteouts.has(p)) return true;
    return false;
  }

  /** The upper directory wins; git shows through unless hidden. Scratch paths exist only in the upper directory. */
  private async resolve(rel: string): Promise<Node | null> {
    try {
      return { stat: await fs.lstat(this.up(rel)) };
    } catch (e) {
      if (!hasCode(e, 'ENOENT') && !hasCode(e, 'ENOTDIR')) throw e;
    }
    return this.gitNode(rel);
  }

  private async gitNode(rel: string): Promise<Node | null> {
    if (this.scratch(rel) || this.hidden(rel)) return null;
    const entry = await this.layer.lookup(rel);
    return entry ? { entry } : null;
  }

  private async need(rel: string): Promise<Node> {
    const node = await this.resolve(rel);
    if (!node) throw fsError('ENOENT');
    return node;
  }

  private check(op: Mutation, rel: string, exists = false): void {
    const code = checkMutation('branch', this.ctx.rules, op, rel, exists);
    if (code) throw fsError(code, `${op} ${rel}: refused by policy`);
  }

  // ---- reading -----------------------------------------------------------------------------------

  async getattr(rel: string): Promise<Attr> {
    const node = await this.need(rel);
    const attr = node.stat ? attrFromStats(node.stat, this.ctx.owner) : await this.layer.attr(node.entry, this.ctx.owner);
    // Untrusted input is read by the branch's own principal only, so every read of it lands in this manifest.
    if (isInbox(rel)) attr.mode &= ~0o077;
    return attr;
  }

  async readdir(rel: string): Promise<string[]> {
    const node = await this.need(rel);
    if (!isDir(node)) throw fsError('ENOTDIR');
    const names = new Set<string>(node.stat ? await fs.readdir(this.up(rel)) : []);
    const git = node.entry ?? (await this.gitNode(rel))?.entry;
    if (git && git.mode === MODE.tree) {
      for (const name of await this.layer.names(git)) {
        const child = join(rel, name);
        if (!this.whiteouts.has(child) && !this.scratch(child)) names.add(name);
      }
    }
    return [...names];
  }

  async readlink(rel: string): Promise<string> {
    const node = await this.need(rel);
    if (node.stat) {
      if (!node.stat.isSymbolicLink()) throw fsError('EINVAL');
      return fs.readlink(this.up(rel));
    }
    if (node.entry.mode !== MODE.link) throw fsError('EINVAL');
    return (await this.layer.content(node.entry)).toString();
  }

  async access(rel: string): Promise<void> {
    await this.need(rel);
  }

  async open(rel: string, flags: number): Promise<Handle> {
    const writing = (flags & 3) !== constants.O_RDONLY || (flags & constants.O_TRUNC) !== 0;
    const node = await this.need(rel);
    if (isDir(node)) {
      if (writing) throw fsError('EISDIR');
      return { rel, fd: null, data: Buffer.alloc(0), writable: false, dirty: false, floor: 0, size: 0 };
    }
    if (!writing) {
      if (node.stat) {
        const fd = await fsx.open(this.up(rel), constants.O_RDONLY);
        return { rel, fd, data: null, writable: false, dirty: false, floor: node.stat.size, size: node.stat.size };
      }
      await this.reads.record(rel, node.entry.oid);
      const data = await this.layer.content(node.entry);
      return { rel, fd: null, data, writable: false, dirty: false, floor: data.length, size: data.length };
    }
    this.check('open-write', rel);
    const truncating = (flags & constants.O_TRUNC) !== 0;
    const refusal = checkOpenForWrite(this.ctx.rules, rel, (flags & constants.O_APPEND) !== 0, truncating);
    if (refusal) throw fsError(refusal, `${rel} is append-only: open it with O_APPEND`);
    let size = node.stat ? node.stat.size : 0;
    if (node.entry) {
      if (!truncating) await this.reads.record(rel, node.entry.oid);
      if (truncating) await this.createEmpty(rel);
      else size = await this.copyUp(rel, node.entry);
    }
    const fd = await fsx.open(this.up(rel), flags & OPEN_FLAGS);
    if (truncating) {
      this.usedBytes -= size;
      size = 0;
    }
    return this.writer({ rel, fd, data: null, writable: true, dirty: truncating, floor: size, size });
  }

  private writer(h: Handle): Handle {
    this.writers.add(h);
    return h;
  }

  async read(h: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    if (h.fd !== null) return fsx.read(h.fd, buf, len, pos);
    const data = h.data ?? Buffer.alloc(0);
    if (pos >= data.length) return 0;
    return data.copy(buf, 0, pos, Math.min(data.length, pos + len));
  }

  // ---- writing files -----------------------------------------------------------------------------

  async create(rel: string, mode: number): Promise<Handle> {
    this.check('create', rel);
    const fd = await this.withParent(rel, () =>
      fsx.open(this.up(rel), constants.O_CREAT | constants.O_RDWR | constants.O_TRUNC, mode & 0o7777),
    );
    return this.writer({ rel, fd, data: null, writable: true, dirty: true, floor: 0, size: 0 });
  }

  async write(h: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    if (!h.writable || h.fd === null) throw fsError('EBADF');
    const end = pos + len;
    const refusal =
      checkAppend(this.ctx.rules, h.rel, pos, h.floor) ?? checkQuota(this.usedBytes, end - h.size, this.ctx.quotaBytes);
    if (refusal) throw fsError(refusal, `write to ${h.rel} refused`);
    const n = await fsx.write(h.fd, buf, len, pos);
    if (end > h.size) {
      this.usedBytes += end - h.size;
      h.size = end;
    }
    h.dirty = true;
    return n;
  }

  /** What a handle wrote is queued for the next commit. */
  private queue(h: Handle): void {
    if (!h.dirty) return;
    h.dirty = false;
    this.markDirty(h.rel);
  }

  /** The last close of a file: what it wrote joins the next commit. */
  async release(h: Handle): Promise<void> {
    this.writers.delete(h);
    this.queue(h);
    if (h.fd !== null) await fsx.close(h.fd);
  }

  /** Returns once the file's content is on disk and every pending change of the branch is a commit. */
  async fsync(h: Handle | null): Promise<void> {
    if (h?.fd != null && h.writable) await fsx.fsync(h.fd);
    if (h) this.queue(h);
    await this.flusher.flushNow();
  }

  async truncate(rel: string, size: number): Promise<void> {
    this.check('truncate', rel);
    const node = await this.need(rel);
    if (isDir(node)) throw fsError('EISDIR');
    let old = node.stat?.size ?? 0;
    if (node.entry) {
      if (size === 0) await this.createEmpty(rel);
      else old = await this.copyUp(rel, node.entry);
    }
    const refusal = checkQuota(this.usedBytes, size - old, this.ctx.quotaBytes);
    if (refusal) throw fsError(refusal);
    await fs.truncate(this.up(rel), size);
    this.usedBytes += size - old;
    this.markDirty(rel);
  }

  async ftruncate(h: Handle, size: number): Promise<void> {
    this.check('truncate', h.rel);
    if (!h.writable || h.fd === null) throw fsError('EBADF');
    const refusal = checkQuota(this.usedBytes, size - h.size, this.ctx.quotaBytes);
    if (refusal) throw fsError(refusal);
    await fsx.ftruncate(h.fd, size);
    this.usedBytes += size - h.size;
    h.size = size;
    h.dirty = true;
  }

  async chmod(rel: string, mode: number): Promise<void> {
    this.check('chmod', rel);
    await this.materialise(rel, await this.need(rel));
    await fs.chmod(this.up(rel), mode & 0o7777);
    this.markDirty(rel);
  }

  /** Ownership is the view's (git keeps none): accepted so tar and rsync -a work, and not stored. */
  async chown(rel: string): Promise<void> {
    this.check('chmod', rel);
    await this.need(rel);
  }

  /** fuse-native passes the access time for both times, so that is what is stored. */
  async utimens(rel: string, atime: number, mtime: number): Promise<void> {
    this.check('utimens', rel);
    await this.materialise(rel, await this.need(rel));
    await fs.lutimes(this.up(rel), new Date(atime), new Date(mtime));
  }

  // ---- names -------------------------------------------------------------------------------------

  async mkdir(rel: string, mode: number): Promise<void> {
    this.check('mkdir', rel);
    if (await this.resolve(rel)) throw fsError('EEXIST');
    await this.withParent(rel, () => fs.mkdir(this.up(rel), mode & 0o7777));
  }

  async symlink(target: string, rel: string): Promise<void> {
    this.check('symlink', rel);
    if (await this.resolve(rel)) throw fsError('EEXIST');
    await this.withParent(rel, () => fs.symlink(target, this.up(rel)));
    this.markDirty(rel);
  }

  /** Hard links exist only in scratch: git cannot represent them. */
  async link(from: string, to: string): Promise<void> {
    this.check('link', to);
    if (!this.scratch(from)) throw fsError('EPERM', 'hard links are only possible within scratch paths');
    await this.withParent(to, () => fs.link(this.up(from), this.up(to)));
  }

  async unlink(rel: string): Promise<void> {
    this.check('unlink', rel);
    if (this.scratch(rel) || isFuseHidden(rel)) {
      const node = await this.need(rel);
      if (isDir(node)) throw fsError('EISDIR');
      await fs.unlink(this.up(rel));
      this.usedBytes -= node.stat?.size ?? 0;
      return;
    }
    // Looked up under the log lock, so a copy-up racing with the unlink cannot slip between the two.
    await this.logDeletion(async () => {
      const node = await this.need(rel);
      if (isDir(node)) throw fsError('EISDIR');
      const record = this.trashRecord(rel, node.stat ? kindOfStats(node.stat) : kindOfMode(node.entry.mode));
      if (node.stat) record.size = node.stat.size;
      else {
        record.oid = node.entry.oid;
        record.size = await this.ctx.store.blobSize(node.entry.oid);
      }
      return {
        entry: { type: 'delete', record, whiteout: true, parked: !!node.stat },
        act: async () => {
          if (!node.stat) return;
          await fs.rename(this.up(rel), `${this.parked}/${record.id}`);
          this.usedBytes -= node.stat.size;
        },
      };
    });
  }

  /**
   * The unlink of a file that is still open, which libfuse turns into a rename to a hidden name: the file is
   * filed in the recycle area under its own name and stays readable through the open descriptors.
   */
  private async unlinkOpen(rel: string, hidden: string): Promise<void> {
    this.check('unlink', rel);
    await this.logDeletion(async () => {
      let node = await this.need(rel);
      if (node.entry) {
        await this.copyUp(rel, node.entry);
        node = await this.need(rel);
      }
      const st = node.stat!;
      const record = this.trashRecord(rel, kindOfStats(st));
      record.size = st.size;
      return {
        entry: { type: 'delete', record, whiteout: true, parked: true },
        act: async () => {
          await fs.link(this.up(rel), `${this.parked}/${record.id}`);
          await fs.rename(this.up(rel), this.up(hidden));
        },
      };
    });
    for (const h of this.writers) if (h.rel === rel) h.rel = hidden;
  }

  async rmdir(rel: string): Promise<void> {
    this.check('rmdir', rel);
    const scratch = this.scratch(rel);
    const remove = async () => {
      const node = await this.need(rel);
      if (!isDir(node)) throw fsError('ENOTDIR');
      if ((await this.readdir(rel)).length > 0) throw fsError('ENOTEMPTY');
      return node;
    };
    if (scratch) {
      await remove();
      await fs.rmdir(this.up(rel));
      return;
    }
    await this.logDeletion(async () => {
      const node = await remove();
      return {
        entry: { type: 'delete', record: this.trashRecord(rel, 'dir'), whiteout: true, parked: false },
        act: async () => {
          if (node.stat) await fs.rmdir(this.up(rel));
        },
      };
    });
  }

  async rename(from: string, to: string): Promise<void> {
    const src = await this.need(from);
    const dst = await this.resolve(to);
    this.check('rename-from', from);
    this.check('rename-to', to, dst !== null);
    if (from === to) return;
    if (to.startsWith(`${from}/`)) throw fsError('EINVAL');
    if (isFuseHidden(to) && !isDir(src) && !this.scratch(from)) return this.unlinkOpen(from, to);
    const srcDir = isDir(src);
    if (dst) {
      const dstDir = isDir(dst);
      if (srcDir && !dstDir) throw fsError('ENOTDIR');
      if (!srcDir && dstDir) throw fsError('EISDIR');
      if (dstDir && (await this.readdir(to)).length > 0) throw fsError('ENOTEMPTY');
    }
    const toVersioned = !this.scratch(to);
    if (srcDir) await this.copyUpTree(from);
    else if (src.entry) await this.copyUp(from, src.entry);
    if (srcDir) {
      const below: string[] = [];
      await this.walkUpper(from, (p) => below.push(p.slice(from.length + 1)));
      const refusal = checkDirectoryMove(this.ctx.rules, from, to, below);
      if (refusal) throw fsError(refusal, `moving ${from} to ${to} would move protected paths`);
      if (toVersioned && below.some((p) => p.split('/').includes('.git'))) {
        throw fsError('EPERM', `${from} contains a .git directory, which cannot live in a versioned area`);
      }
    }
    // Hide git's copy of the source (a commit under way may be adding it), and of a directory replaced at
    // the target (its contents were all deleted). Logged before the rename, as deletions are.
    const dstGit = dst ? await this.gitNode(to) : null;
    const hide = [this.scratch(from) ? null : from, dstGit && isDir(dstGit) ? to : null].filter((p): p is string => p !== null);
    if (hide.length) await this.logWhiteouts(hide);
    try {
      await this.withParent(to, () => fs.rename(this.up(from), this.up(to)));
    } catch (e) {
      // The source stays where it was, in the upper directory: commit it again over its whiteout.
      if (srcDir) await this.walkUpper(from, (rel, st) => !st.isDirectory() && this.markDirty(rel));
      else this.markDirty(from);
      throw e;
    }
    for (const h of this.writers) {
      if (h.rel === from || h.rel.startsWith(`${from}/`)) {
        h.rel = to + h.rel.slice(from.length);
        // Writes through an open descriptor now answer to the new path's rules, from its current end.
        if (isAppendOnly(this.ctx.rules, h.rel)) h.floor = h.size;
      }
    }
    for (const p of [...this.dirty.keys()]) if (p === from || p.startsWith(`${from}/`)) this.dirty.delete(p);
    if (toVersioned) {
      if (srcDir) await this.walkUpper(to, (rel, st) => !st.isDirectory() && this.markDirty(rel));
      else this.markDirty(to);
    }
    this.flusher.schedule();
  }

  // ---- copy-up -----------------------------------------------------------------------------------

  /** Run fn; if it fails because the parent exists only in git, create the parent in the upper directory and retry. */
  private async withParent<T>(rel: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (!hasCode(e, 'ENOENT')) throw e;
    }
    await fs.mkdir(this.up(parentOf(rel)), { recursive: true, mode: 0o755 });
    return fn();
  }

  private async createEmpty(rel: string): Promise<void> {
    await this.withParent(rel, () => fs.writeFile(this.up(rel), ''));
  }

  /** Bring a file, symlink or directory that exists only in git into the upper directory. */
  private async materialise(rel: string, node: Node): Promise<void> {
    if (node.stat) return;
    if (node.entry.mode === MODE.tree) await fs.mkdir(this.up(rel), { recursive: true, mode: 0o755 });
    else await this.copyUp(rel, node.entry);
  }

  /** Copy a git file into the upper directory (once, however many callers race); returns its size. */
  private async copyUp(rel: string, entry: Entry): Promise<number> {
    let running = this.copying.get(rel);
    if (!running) {
      running = this.doCopyUp(rel, entry).finally(() => this.copying.delete(rel));
      this.copying.set(rel, running);
    }
    await running;
    return this.ctx.store.blobSize(entry.oid);
  }

  private async doCopyUp(rel: string, entry: Entry): Promise<void> {
    // A copy in the upper directory is read from there, unrecorded: count the copy as the read.
    await this.reads.record(rel, entry.oid);
    const data = await this.layer.content(entry);
    const refusal = checkQuota(this.usedBytes, data.length, this.ctx.quotaBytes);
    if (refusal) throw fsError(refusal);
    // Write beside, then rename: a crash never leaves a half-copied file in the upper directory.
    const tmp = `${this.tmp}/${randomBytes(6).toString('hex')}`;
    if (entry.mode === MODE.link) await fs.symlink(data.toString(), tmp);
    else await fs.writeFile(tmp, data, { mode: entry.mode === MODE.exec ? 0o755 : 0o644 });
    // link, not rename: if a writer got there first, its file stays and this copy is dropped.
    try {
      await this.withParent(rel, () => fs.link(tmp, this.up(rel)));
      this.usedBytes += data.length;
    } catch (e) {
      if (!hasCode(e, 'EEXIST')) throw e;
    } finally {
      await fs.unlink(tmp);
    }
  }

  /** Copy a whole directory up, so that renaming it moves everything it shows. */
  private async copyUpTree(rel: string): Promise<void> {
    await fs.mkdir(this.up(rel), { recursive: true, mode: 0o755 });
    for (const name of await this.readdir(rel)) {
      const child = join(rel, name);
      const node = await this.resolve(child);
      if (!node) continue;
      if (isDir(node)) await this.copyUpTree(child);
      else if (node.entry) await this.copyUp(child, node.entry);
    }
  }

  /** Visit everything below rel in the upper directory (rel itself excluded). */
  private async walkUpper(rel: string, visit: (rel: string, st: Stats) => unknown): Promise<void> {
    let names: string[];
    try {
      names = await fs.readdir(this.up(rel));
    } catch (e) {
      if (hasCode(e, 'ENOENT') || hasCode(e, 'ENOTDIR')) return;
      throw e;
    }
    for (const name of names) {
      const child = join(rel, name);
      const st = await fs.lstat(this.up(child));
      visit(child, st);
      if (st.isDirectory()) await this.walkUpper(child, visit);
    }
  }

  // ---- deletions ---------------------------------------------------------------------------------

  private trashRecord(rel: string, kind: TrashKind): TrashRecord {
    return trashRecord(rel, this.ctx.branch, kind, { run: this.ctx.runId });
  }

  /** Serialise changes to the pending log with its rewrite after a commit. */
  private withLogLock<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.logLock.then(fn, fn);
    this.logLock = run.catch(() => undefined);
    return run;
  }

  /**
   * Log first, then act: after a crash the log says what may have happened, and recovery checks.
   * `prepare` runs under the log lock, so what it looked up cannot change before the deletion is logged.
   * A versioned deletion always hides git's copy: a commit already under way may be adding the path.
   */
  private async logDeletion(
    prepare: () => Promise<{ entry: Extract<PendingEntry, { type: 'delete' }>; act: () => Promise<void> }>,
  ): Promise<void> {
    await this.withLogLock(async () => {
      const { entry, act } = await prepare();
      await this.pending.append([entry]);
      await act();
      this.deletions.push(entry);
      if (entry.whiteout) this.whiteouts.set(entry.record.path, ++this.gen);
      this.dirty.delete(entry.record.path);
    });
    this.flusher.schedule();
  }

  private async logWhiteouts(paths: string[]): Promise<void> {
    await this.withLogLock(async () => {
      await this.pending.append(paths.map((path) => ({ type: 'whiteout' as const, path })));
      for (const p of paths) this.whiteouts.set(p, ++this.gen);
    });
  }

  // ---- commits -----------------------------------------------------------------------------------

  private markDirty(rel: string): void {
    if (this.scratch(rel) || isFuseHidden(rel)) return;
    this.dirty.set(rel, ++this.gen);
    this.flusher.schedule();
  }

  /**
   * Commit everything pending now and wait for it (`nas sync`, shutdown). Files still open include what
   * they wrote so far: the kernel sends the release of a closed file asynchronously.
   */
  sync(): Promise<void> {
    for (const h of this.writers) this.queue(h);
    return this.flusher.flushNow();
  }

  /** One commit for everything dirty, deleted and hidden since the last one; then the deletions to the recycle area. */
  private async commitPending(): Promise<void> {
    if (this.pendingChanges === 0) return;
    const dirty = [...this.dirty];
    const whiteouts = [...this.whiteouts];
    const deletions = this.deletions.slice();
    const head = this.layer.commit;
    // Deletions first, then what is written: "rm -r d; mkdir d; echo > d/f" must end with d/f in the tree.
    const changes = new Map<string, Entry | null>();
    for (const [path] of whiteouts) if (await this.ctx.store.lookupPath(head.tree, path)) changes.set(path, null);
    const deleted = [...changes.keys()];
    const blobs = await mapLimit(dirty, 16, ([path]) => this.hashUpper(path));
    const written: string[] = [];
    dirty.forEach(([path], i) => {
      const entry = blobs[i];
      if (!entry) return;
      changes.delete(path);
      changes.set(path, entry);
      written.push(path);
    });
    const tree = await this.ctx.store.editTree(head.tree, changes);
    if (tree !== head.tree) {
      const message = commitMessage(written, deleted.filter((p) => changes.get(p) === null), this.ctx.branch, this.ctx.runId);
      const commit = await this.ctx.store.writeCommit({ tree, parents: [head.oid], message, author: this.ctx.identity });
      await this.ctx.store.updateRef(branchRef(this.ctx.branch), commit, head.oid, 'nasd: commit');
      this.layer = new GitLayer(this.ctx.store, await this.ctx.store.readCommit(commit));
    }
    await this.ctx.trash.add(
      deletions.map((d) => ({ record: d.record, contentFile: d.parked ? `${this.parked}/${d.record.id}` : undefined })),
    );
    // Forget what is committed, unless it changed again while the commit was being made.
    for (const [p, g] of dirty) if (this.dirty.get(p) === g) this.dirty.delete(p);
    for (const [p, g] of whiteouts) if (this.whiteouts.get(p) === g) this.whiteouts.delete(p);
    this.deletions.splice(0, deletions.length);
    await this.withLogLock(() => this.pending.rewrite(this.pendingEntries()));
    for (const d of deletions) if (d.parked) await fs.rm(`${this.parked}/${d.record.id}`, { force: true });
  }

  /** The git entry for an upper file, or null if it is gone (renamed or deleted since: that change is pending too). */
  private async hashUpper(path: string): Promise<Entry | null> {
    let st: Stats;
    try {
      st = await fs.lstat(this.up(path));
    } catch {
      return null;
    }
    if (st.isDirectory() || isFuseHidden(path) || path.split('/').includes('.git')) return null;
    const oid = st.isSymbolicLink()
      ? await this.ctx.store.writeBlob(await fs.readlink(this.up(path)))
      : await this.ctx.store.writeBlobFromFile(this.up(path));
    return { oid, mode: gitModeOf(st) };
  }

  private pendingEntries(): PendingEntry[] {
    const fromDeletions = new Set(this.deletions.filter((d) => d.whiteout).map((d) => d.record.path));
    const rest: PendingEntry[] = [...this.whiteouts.keys()]
      .filter((p) => !fromDeletions.has(p))
      .map((path) => ({ type: 'whiteout', path }));
    return [...rest, ...this.deletions];
  }

  // ---- control API -------------------------------------------------------------------------------

  async exists(rel: string): Promise<boolean> {
    return (await this.resolve(rel)) !== null;
  }

  /** Put content back at rel (recycle-area restore) and commit it. The caller checks that rel is free. */
  async restore(rel: string, kind: TrashKind, content: Buffer): Promise<void> {
    this.check('create', rel);
    await this.realParents(rel);
    if (kind === 'dir') await fs.mkdir(this.up(rel), { recursive: true, mode: 0o755 });
    else await this.place(rel, kind, content);
    await this.sync();
  }

  /**
   * Replace (or create) a regular file with generated content, as a whole-file rewrite through the mount
   * would, and commit it. `expected` guards against losing a change made since the content was computed:
   * null means rel must not exist, a blob id that rel must still hold. Refused while a process has the file
   * open for writing: its writes would be lost.
   */
  async writeFile(rel: string, content: Buffer, expected?: string | null): Promise<void> {
    await this.realParents(rel);
    const node = await this.resolve(rel);
    if (node && isDir(node)) throw fsError('EISDIR', `${rel} is a directory`);
    this.check(node ? 'truncate' : 'create', rel, node !== null);
    if ([...this.writers].some((h) => h.rel === rel)) throw fsError('EBUSY', `${rel} is open for writing in ${this.name}; close it, then retry`);
    if (expected === null && node) throw fsError('EEXIST', `${rel} exists in ${this.name}`);
    if (expected && node && (node.entry?.oid ?? (await this.hashUpper(rel))?.oid) !== expected) {
      throw fsError('EBUSY', `${rel} changed in ${this.name} while this ran; nothing was written: run it again`);
    }
    const refusal = checkQuota(this.usedBytes, content.length - (node?.stat?.size ?? 0), this.ctx.quotaBytes);
    if (refusal) throw fsError(refusal, `${rel}: the branch is over its quota (branch_quota_bytes)`);
    if (node?.stat) this.usedBytes -= node.stat.size;
    await this.place(rel, 'file', content);
    await this.sync();
  }

  /** Control-API writes take a path, not a kernel lookup: refuse one that leads through a symbolic link. */
  private async realParents(rel: string): Promise<void> {
    const parts = rel.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      const node = await this.resolve(dir);
      if (!node) return;
      if (node.stat ? node.stat.isSymbolicLink() : node.entry.mode === MODE.link) throw fsError('ELOOP', `${dir} is a symbolic link; nothing is written through it`);
      if (!isDir(node)) throw fsError('ENOTDIR', `${dir} is not a directory`);
    }
  }

  /** Write content to a temporary file, then rename it into the upper directory: readers never see half of it. */
  private async place(rel: string, kind: Exclude<TrashKind, 'dir'>, content: Buffer): Promise<void> {
    const tmp = `${this.tmp}/${randomBytes(6).toString('hex')}`;
    if (kind === 'symlink') await fs.symlink(content.toString(), tmp);
    else await fs.writeFile(tmp, content, { mode: kind === 'exec' ? 0o755 : 0o644 });
    await this.withParent(rel, () => fs.rename(tmp, this.up(rel)));
    this.usedBytes += content.length;
    this.markDirty(rel);
  }

  /** Commit what is pending and stop the batching timer. */
  async close(): Promise<void> {
    await this.sync();
    this.flusher.stop();
    await this.pending.close();
    await this.reads.close();
  }
}

function kindOfStats(st: Stats): TrashKind {
  if (st.isSymbolicLink()) return 'symlink';
  return st.mode & 0o100 ? 'exec' : 'file';
}

async function exists(path: string): Promise<boolean> {
  try {
    await fs.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** A subject naming the changed paths, a body listing all of them, and trailers for branch and run. */
export function commitMessage(written: string[], deleted: string[], branch: string, runId?: string): string {
  const all = [...written, ...deleted];
  const shown = all.slice(0, 3).join(', ');
  const subject = all.length === 1 ? `nasd: ${written.length ? 'write' : 'delete'} ${shown}` : `nasd: ${all.length} paths: ${shown}${all.length > 3 ? ', ...' : ''}`;
  const lines = [...written.map((p) => `write  ${p}`), ...deleted.map((p) => `delete ${p}`)];
  const body = lines.length > 1000 ? [...lines.slice(0, 1000), `... and ${lines.length - 1000} more`] : lines;
  const trailers = [`Nas-Branch: ${branch}`, ...(runId ? [`Nas-Run: ${runId}`] : [])];
  return `${subject}\n\n${body.join('\n')}\n\n${trailers.join('\n')}\n`;
}
