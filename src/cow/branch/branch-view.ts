import fs from 'node:fs/promises';
import { constants } from 'node:fs';
import type { Logger } from 'pino';
import { fsError, hasCode } from '../../util/errors.js';
import { MODE, type Identity, type Store } from '../../store/store.js';
import { branchRef } from '../../store/refs.js';
import type { Trash, TrashKind } from '../../trash/trash.js';
import { checkAppend, checkOpenForWrite, isAppendOnly, visibleMode, type Rules } from '../../policy/policy.js';
import { attrFromStats, gitIno, type Attr, type Owner } from '../attr.js';
import type { Caller } from '../../util/owner.js';
import { ownNewFile } from './ownership.js';
import { GitLayer } from '../git-layer.js';
import * as fsx from '../fsx.js';
import type { Handle, TimeArg, WritableView } from '../view.js';
import { Committer } from './committer.js';
import { advance, type MakeCommit } from './advance.js';
import { CopyUp } from './copy-up.js';
import { Deletions } from './deletions.js';
import { Names } from './names.js';
import { isDir, Overlay } from './overlay.js';
import { isFuseHidden, parentOf } from './paths.js';
import { ReadManifest } from './read-manifest.js';
import { Space } from './space.js';
import { chmodNoFollow } from '../../util/beneath.js';

export interface BranchContext {
  role: string;
  branch: string;
  store: Store;
  trash: Trash;
  identity: Identity;
  owner: Owner;
  rules: Rules;
  quotaBytes: number;
  /** The Home's pool: its quota across all branches (absent: none). */
  homeSpace?: Space;
  runId?: string;
  /** The commit the branch forked from: files the branch has not changed show its time. */
  base?: string;
  /** The branch's own directory in the Store: upper/, deleted/, tmp/, pending.jsonl, reads.jsonl. */
  dir: string;
  /** Batching window for commits. */
  windowMs: number;
  log: Logger;
}

const OPEN_FLAGS = 3 | constants.O_APPEND | constants.O_TRUNC;

/**
 * A writable branch of a Home: the branch's head commit in git, overlaid by an upper directory of files
 * written since, minus whiteouts for what was deleted. Unchanged files are served from git objects; the
 * first write copies a file up. Closed and fsynced files become commits; scratch paths (workspace/) stay in
 * the upper directory only.
 *
 * This class answers the syscalls, each in a few steps over its parts: the overlay (what a path is), copy-up,
 * deletions (logged before they happen), the committer (dirty paths into commits), names (mkdir, link,
 * unlink, rename) and the space used against the quota.
 */
export class BranchView implements WritableView {
  readonly kind = 'branch' as const;
  readonly name: string;
  /** What the run read from git through this view (SPEC.md, Agent Branch, requirement 4). */
  reads!: ReadManifest;
  private readonly overlay: Overlay;
  private readonly space: Space;
  private readonly copy: CopyUp;
  private readonly deletions: Deletions;
  private readonly committer: Committer;
  private readonly names: Names;
  private readonly defaults: { owner: Owner; quotaBytes: number };
  /** The write leases in force (setLease): the newest owns the view; a descriptor writes while its own lasts. */
  private leasesInForce = new Set<string>();
  private newestLease?: string;
  /** The uids of those leases' principals: with root and the default owner, the only ones who change the view. */
  private writers = new Set<number>();

  private constructor(
    private readonly ctx: BranchContext,
    layer: GitLayer,
    private readonly scratchRoots: string[],
    /** The upper directory, held open: its paths go through this descriptor (see open). */
    private readonly upperRoot: fs.FileHandle,
  ) {
    this.name = `${ctx.role}@${ctx.branch}`;
    this.defaults = { owner: ctx.owner, quotaBytes: ctx.quotaBytes };
    this.overlay = new Overlay(`${ctx.dir}/upper`, `/proc/${process.pid}/fd/${upperRoot.fd}`, ctx.rules, layer);
    this.space = new Space(ctx.quotaBytes, ctx.homeSpace);
    this.copy = new CopyUp(this.overlay, ctx.store, `${ctx.dir}/tmp`, () => this.reads, this.space, () => this.ctx.owner);
    this.deletions = new Deletions(this.overlay, `${ctx.dir}/deleted`, `${ctx.dir}/pending.jsonl`, (path) => this.committer.dirty.delete(path));
    this.committer = new Committer({ ...ctx, name: this.name }, this.overlay, this.deletions);
    this.names = new Names(
      { store: ctx.store, branch: ctx.branch, runId: ctx.runId }, this.overlay, this.copy, this.deletions, this.committer, this.space,
    );
  }

  /** Open a branch view, recovering what a crash left: uncommitted upper files and pending deletions. */
  static async open(ctx: BranchContext, scratchRoots: string[]): Promise<BranchView> {
    const upper = `${ctx.dir}/upper`;
    for (const d of [upper, `${ctx.dir}/deleted`, `${ctx.dir}/tmp`]) await fs.mkdir(d, { recursive: true });
    for (const s of scratchRoots) await realDirectory(`${upper}/${s}`);
    await fs.rm(`${ctx.dir}/tmp`, { recursive: true, force: true });
    await fs.mkdir(`${ctx.dir}/tmp`);
    const head = await ctx.store.readRef(branchRef(ctx.branch));
    if (!head) throw new Error(`branch ${ctx.branch} has no ref in ${ctx.store.path}`);
    const headCommit = await ctx.store.readCommit(head);
    const fork = ctx.base && /^[0-9a-f]{40}$/.test(ctx.base) ? await ctx.store.readCommit(ctx.base).catch(() => headCommit) : headCommit;
    const root = await fs.open(upper, constants.O_RDONLY | constants.O_DIRECTORY);
    const view = new BranchView(ctx, new GitLayer(ctx.store, headCommit, new Date(fork.time * 1000)), scratchRoots, root);
    try {
      view.reads = await ReadManifest.open(`${ctx.dir}/reads.jsonl`);
      await view.giveRootsToOwner();
      await view.recover();
    } catch (err) {
      await root.close();
      throw err;
    }
    return view;
  }

  get head(): string {
    return this.overlay.layer.commit.oid;
  }

  /**
   * The write lease in force, or none: its principal owns the view's files and its budget caps the branch's
   * quota. `inForce`: every write lease in force, newest first, with its principal's account (null: no local one).
   */
  async setLease(
    lease: { owner: Owner | null; budgetBytes?: number } | null, inForce: { id: string; owner: Owner | null }[] = [],
  ): Promise<void> {
    this.leasesInForce = new Set(inForce.map((l) => l.id));
    this.newestLease = inForce[0]?.id;
    this.writers = new Set(inForce.flatMap((l) => (l.owner ? [l.owner.uid] : [])));
    this.ctx.owner = lease?.owner ?? this.defaults.owner;
    this.space.limit = Math.min(this.defaults.quotaBytes, lease?.budgetBytes ?? Infinity);
    await this.giveRootsToOwner();
  }

  /**
   * The view's root and its scratch roots belong to the view's owner, so that account can make files there.
   * Everything else keeps the owner it has, as on a disk: what a caller made is the caller's.
   * Scratch roots are served by the kernel straight from disk (mayWrite is never asked there), so only their
   * owner may enter them (0700): once a lease ends, what its principal made in workspace/ is out of its reach.
   */
  private async giveRootsToOwner(): Promise<void> {
    await fs.lchown(this.overlay.up(''), this.ctx.owner.uid, this.ctx.owner.gid);
    for (const { dir } of this.scratchDirs()) {
      // Through a descriptor: a mode is never given to what a symbolic link put there points to.
      const fh = await fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      try {
        await fh.chown(this.ctx.owner.uid, this.ctx.owner.gid);
        await fh.chmod(0o700);
      } finally {
        await fh.close();
      }
    }
  }

  /** Top-level scratch directories (workspace/) and where they live on disk. */
  scratchDirs(): { name: string; dir: string }[] {
    return this.scratchRoots.map((name) => ({ name, dir: `${this.ctx.dir}/upper/${name}` }));
  }

  changedBy(uid: number): void {
    this.committer.changedBy(uid);
  }

  /**
   * Whether uid may change the view: root, its default owner, or a principal of a write lease in force. The
   * modes are not enough: what a former lease holder made stays theirs, and a principal may open a folder
   * to everyone (chmod 1777).
   */
  mayWrite(uid: number): boolean {
    return uid === 0 || uid === this.defaults.owner.uid || this.writers.has(uid);
  }

  get owner(): Owner {
    return this.ctx.owner;
  }

  /** The run the branch was created for (--run), if any. */
  get run(): string | undefined {
    return this.ctx.runId;
  }

  get quota(): { used: number; limit: number } {
    return { used: this.space.used, limit: this.space.limit };
  }

  /** Bytes in the upper directory by class: scratch (workspace/, ignored paths) and versioned (not committed yet or copied up). */
  async bytesByClass(): Promise<{ scratch: number; versioned: number }> {
    const files: [string, number][] = [];
    await this.overlay.walkUpper('', (rel, st) => !st.isDirectory() && files.push([rel, st.size]));
    const out = { scratch: 0, versioned: 0 };
    for (const [rel, size] of files) out[(await this.overlay.scratchAt(rel)) ? 'scratch' : 'versioned'] += size;
    return out;
  }

  get pendingChanges(): number {
    return this.committer.pendingChanges;
  }

  private async recover(): Promise<void> {
    await this.deletions.recover();
    const leftovers: string[] = [];
    // Scratch roots are skipped: nothing there is committed, and workspace/ may be large (node_modules...).
    await this.overlay.walkUpper('', (rel, st) => {
      // Files unlinked while open are gone once the mount that kept them open is gone.
      if (isFuseHidden(rel)) leftovers.push(rel);
      else {
        this.space.used += st.isDirectory() ? 0 : st.size;
        if ((st.isFile() || st.isSymbolicLink()) && !this.overlay.scratch(rel)) this.committer.dirty.set(rel, this.overlay.next());
      }
    }, (rel) => !this.scratchRoots.includes(rel));
    for (const rel of leftovers) await this.overlay.tree.removeTree(rel);
    if (this.pendingChanges > 0) {
      // How many files are looked at, not how many changed: the commit's own log line says that.
      this.ctx.log.info({ view: this.name, files: this.committer.dirty.size, deletions: this.deletions.waiting.length }, 'recovering: committing what the last run left on disk');
      this.committer.schedule(0);
    }
  }

  // ---- reading -----------------------------------------------------------------------------------

  async getattr(rel: string): Promise<Attr> {
    const st = await this.overlay.statNs(rel);
    let attr: Attr;
    if (st) attr = attrFromStats(st);
    else {
      // Git keeps no owners or times: what the branch has not changed shows the view's owner and fork time.
      const node = await this.overlay.gitNode(rel);
      if (!node) throw fsError('ENOENT');
      attr = await this.overlay.layer.attr(rel, node.entry!, this.ctx.owner, gitIno(this.name, rel));
    }
    // Untrusted input is read by the branch's own principal only, so every read of it lands in this manifest.
    attr.mode = visibleMode(rel, attr.mode);
    return attr;
  }

  readdir(rel: string): Promise<string[]> {
    return this.overlay.names(rel);
  }

  async readlink(rel: string): Promise<string> {
    const node = await this.overlay.need(rel);
    if (node.stat) {
      if (!node.stat.isSymbolicLink()) throw fsError('EINVAL');
      return this.overlay.tree.at(rel, (p) => fs.readlink(p));
    }
    if (node.entry.mode !== MODE.link) throw fsError('EINVAL');
    return (await this.overlay.layer.content(node.entry)).toString();
  }

  async access(rel: string): Promise<void> {
    await this.overlay.need(rel);
  }

  async open(rel: string, flags: number): Promise<Handle> {
    const writing = (flags & 3) !== constants.O_RDONLY || (flags & constants.O_TRUNC) !== 0;
    const node = await this.overlay.need(rel);
    if (isDir(node)) {
      if (writing) throw fsError('EISDIR');
      return { rel, fd: null, data: Buffer.alloc(0), writable: false, dirty: false, floor: 0, size: 0 };
    }
    if (!writing) {
      if (node.stat) {
        const fd = await this.overlay.tree.at(rel, (p) => fsx.open(p, constants.O_RDONLY | constants.O_NOFOLLOW));
        return { rel, fd, data: null, writable: false, dirty: false, floor: node.stat.size, size: node.stat.size };
      }
      await this.reads.record(rel, node.entry.oid);
      const data = await this.overlay.layer.content(node.entry);
      return { rel, fd: null, data, writable: false, dirty: false, floor: data.length, size: data.length };
    }
    await this.overlay.check('open-write', rel);
    const truncating = (flags & constants.O_TRUNC) !== 0;
    const refusal = checkOpenForWrite(this.overlay.rules, rel, (flags & constants.O_APPEND) !== 0, truncating);
    if (refusal) throw fsError(refusal, `${rel} is append-only: open it with O_APPEND`);
    let size = node.stat ? node.stat.size : 0;
    if (node.entry) {
      if (!truncating) await this.reads.record(rel, node.entry.oid);
      if (truncating) await this.copy.createEmpty(rel);
      else size = await this.copy.file(rel, node.entry);
    }
    const fd = await this.overlay.tree.at(rel, (p) => fsx.open(p, (flags & OPEN_FLAGS) | constants.O_NOFOLLOW));
    if (truncating) {
      this.space.used -= size;
      size = 0;
    }
    return this.writer({ rel, fd, data: null, writable: true, dirty: truncating, floor: size, size });
  }

  private writer(h: Handle): Handle {
    h.lease = this.newestLease;
    h.appendOnly = isAppendOnly(this.overlay.rules, h.rel);
    this.committer.writers.add(h);
    return h;
  }

  /** The branch's TTL passed: what is pending is committed, and from now on every change is EROFS. */
  async expire(why: string): Promise<void> {
    if (this.overlay.closedBecause) return;
    await this.sync();
    this.overlay.closedBecause = why;
  }

  /** The owner extended an expired branch's TTL: it takes writes again (the leases that ended stay ended). */
  reopen(): void {
    this.overlay.closedBecause = undefined;
  }

  get expired(): boolean {
    return this.overlay.closedBecause !== undefined;
  }

  /** A descriptor opened under a lease that was revoked or has expired writes nothing more; nothing writes once the branch expired. */
  private checkLease(h: Handle): void {
    if (this.overlay.closedBecause) throw fsError('EROFS', this.overlay.closedBecause);
    if (h.lease && !this.leasesInForce.has(h.lease)) throw fsError('EACCES', `${h.rel} was opened under lease ${h.lease}, which has ended`);
  }

  async read(h: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    if (h.fd !== null) return fsx.read(h.fd, buf, len, pos);
    const data = h.data ?? Buffer.alloc(0);
    if (pos >= data.length) return 0;
    return data.copy(buf, 0, pos, Math.min(data.length, pos + len));
  }

  // ---- writing files -----------------------------------------------------------------------------

  async create(rel: string, mode: number, caller?: Caller | null): Promise<Handle> {
    await this.overlay.check('create', rel);
    // Made new in its parent held open, and given to the caller through its descriptor. A name made meanwhile
    // (the kernel sends CREATE for a name it found free) is opened as open(2) would: truncated, its owner kept.
    const fd = await this.copy.withParent(rel, () => this.overlay.tree.inDir(parentOf(rel), async (dir) => {
      const name = `${dir}/${rel.slice(rel.lastIndexOf('/') + 1)}`;
      let made: number;
      try {
        made = await fsx.open(name, constants.O_CREAT | constants.O_EXCL | constants.O_RDWR | constants.O_NOFOLLOW, mode & 0o7777);
      } catch (e) {
        if (!hasCode(e, 'EEXIST')) throw e;
        return fsx.open(name, constants.O_RDWR | constants.O_TRUNC | constants.O_NOFOLLOW);
      }
      try {
        await ownNewFile(made, dir, caller, mode);
      } catch (e) {
        await fsx.close(made);
        throw e;
      }
      return made;
    }));
    return this.writer({ rel, fd, data: null, writable: true, dirty: true, floor: 0, size: 0 });
  }

  async write(h: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    if (!h.writable || h.fd === null) throw fsError('EBADF');
    this.checkLease(h);
    const end = pos + len;
    const refusal = (h.appendOnly ? checkAppend(this.overlay.rules, h.rel, pos, h.floor) : null) ?? this.space.refusal(end - h.size);
    if (refusal) throw fsError(refusal, `write to ${h.rel} refused`);
    const n = await fsx.write(h.fd, buf, len, pos);
    // Append-only means every write appends (as with chattr +a), also in a file made without O_APPEND:
    // what was written, and maybe committed, is not written over.
    if (h.appendOnly) h.floor = Math.max(h.floor, pos + n);
    if (end > h.size) {
      this.space.used += end - h.size;
      h.size = end;
    }
    h.dirty = true;
    return n;
  }

  /** The last close of a file: what it wrote joins the next commit. */
  async release(h: Handle): Promise<void> {
    this.committer.writers.delete(h);
    this.committer.queue(h);
    if (h.fd !== null) await fsx.close(h.fd);
  }

  /** Returns once the file's content is on disk and every pending change of the branch is a commit. */
  async fsync(h: Handle | null): Promise<void> {
    if (h?.fd != null && h.writable) await fsx.fsync(h.fd);
    if (h) this.committer.queue(h);
    await this.committer.flushNow();
  }

  async truncate(rel: string, size: number): Promise<void> {
    await this.overlay.check('truncate', rel);
    const node = await this.overlay.need(rel);
    if (isDir(node)) throw fsError('EISDIR');
    let old = node.stat?.size ?? 0;
    if (node.entry) {
      if (size === 0) await this.copy.createEmpty(rel);
      else old = await this.copy.file(rel, node.entry);
    }
    const refusal = this.space.refusal(size - old);
    if (refusal) throw fsError(refusal);
    await this.overlay.tree.at(rel, async (p) => {
      const fd = await fsx.open(p, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      try {
        await fsx.ftruncate(fd, size);
      } finally {
        await fsx.close(fd);
      }
    });
    this.space.used += size - old;
    this.committer.markDirty(rel);
  }

  async ftruncate(h: Handle, size: number): Promise<void> {
    await this.overlay.check('truncate', h.rel);
    if (!h.writable || h.fd === null) throw fsError('EBADF');
    this.checkLease(h);
    const refusal = this.space.refusal(size - h.size);
    if (refusal) throw fsError(refusal);
    await fsx.ftruncate(h.fd, size);
    this.space.used += size - h.size;
    h.size = size;
    h.dirty = true;
  }

  async chmod(rel: string, mode: number): Promise<void> {
    await this.overlay.check('chmod', rel);
    await this.copy.materialise(rel, await this.overlay.need(rel));
    await this.overlay.tree.at(rel, (p) => chmodNoFollow(p, mode & 0o7777));
    this.committer.markDirty(rel);
  }

  /** Owner and group are kept on the upper file, as on a disk (the kernel has checked who may change them). */
  async chown(rel: string, uid: number, gid: number): Promise<void> {
    await this.overlay.check('chmod', rel);
    await this.copy.materialise(rel, await this.overlay.need(rel));
    // (uid_t)-1 and (gid_t)-1 mean "leave it".
    const keep = (id: number) => (id === 0xffffffff || id === -1 ? -1 : id);
    await this.overlay.tree.at(rel, (p) => fs.lchown(p, keep(uid), keep(gid)));
    this.committer.markDirty(rel); // the file's metadata record follows
  }

  /** Each time as asked: a given time (nanoseconds), now, or left as it is. */
  async utimens(rel: string, atime: TimeArg, mtime: TimeArg): Promise<void> {
    await this.overlay.check('utimens', rel);
    await this.copy.materialise(rel, await this.overlay.need(rel));
    const ns = (t: TimeArg): fsx.NsTime => {
      if (t === 'now' || t === 'omit') return t;
      if (typeof t === 'number') return BigInt(Math.round(t)) * 1_000_000n;
      return BigInt(t.sec) * 1_000_000_000n + BigInt(t.nsec);
    };
    await this.overlay.tree.at(rel, async (p) => fsx.setTimes(p, ns(atime), ns(mtime)));
    this.committer.markDirty(rel); // the file's metadata record follows
  }

  // ---- names (see names.ts) ----------------------------------------------------------------------

  mkdir(rel: string, mode: number, caller?: Caller | null): Promise<void> {
    return this.names.mkdir(rel, mode, caller);
  }

  symlink(target: string, rel: string, caller?: Caller | null): Promise<void> {
    return this.names.symlink(target, rel, caller);
  }

  link(from: string, to: string): Promise<void> {
    return this.names.link(from, to);
  }

  unlink(rel: string): Promise<void> {
    return this.names.unlink(rel);
  }

  rmdir(rel: string): Promise<void> {
    return this.names.rmdir(rel);
  }

  rename(from: string, to: string): Promise<void> {
    return this.names.rename(from, to);
  }

  mknod(rel: string, mode: number, dev: number, caller?: Caller | null): Promise<void> {
    return this.names.mknod(rel, mode, dev, caller);
  }

  /** Commit everything pending now and wait for it (`nas sync`, shutdown); open files included. */
  sync(): Promise<void> {
    return this.committer.sync();
  }

  // ---- control API -------------------------------------------------------------------------------

  /** The branch's policy rules (what a restore into it must respect too). */
  get rules(): Rules {
    return this.overlay.rules;
  }

  async exists(rel: string): Promise<boolean> {
    return (await this.overlay.resolve(rel)) !== null;
  }

  /**
   * Put content back at rel (from the recycle area, or a restore to an older commit, which may write over a
   * file: `replace`) and commit it; `commit: false` leaves the commit to the caller's sync (many files at once:
   * one commit). Without `replace` a file made at rel meanwhile stays and the restore fails with EEXIST.
   */
  async restore(rel: string, kind: TrashKind, content: Buffer, { commit = true, replace = false } = {}): Promise<void> {
    await this.overlay.check('create', rel);
    await this.realParents(rel);
    if (kind === 'dir') await this.copy.directory(rel);
    else {
      if ([...this.committer.writers].some((h) => h.rel === rel)) throw fsError('EBUSY', `${rel} is open for writing in ${this.name}; close it, then retry`);
      // A file restored over one in the upper directory replaces its bytes in the quota.
      const node = await this.overlay.resolve(rel);
      if (replace && node?.stat && !isDir(node)) this.space.used -= node.stat.size;
      await this.place(rel, kind, content, replace);
    }
    if (commit) await this.sync();
  }

  /**
   * Replace (or create) a regular file with generated content, as a whole-file rewrite through the mount
   * would, and commit it. `expected` guards against losing a change made since the content was computed:
   * null means rel must not exist, a blob id that rel must still hold. Refused while a process has the file
   * open for writing: its writes would be lost.
   */
  async writeFile(rel: string, content: Buffer, expected?: string | null): Promise<void> {
    await this.realParents(rel);
    const node = await this.overlay.resolve(rel);
    if (node && isDir(node)) throw fsError('EISDIR', `${rel} is a directory`);
    await this.overlay.check(node ? 'truncate' : 'create', rel, node !== null);
    if ([...this.committer.writers].some((h) => h.rel === rel)) throw fsError('EBUSY', `${rel} is open for writing in ${this.name}; close it, then retry`);
    if (expected === null && node) throw fsError('EEXIST', `${rel} exists in ${this.name}`);
    if (expected && node && (node.entry?.oid ?? (await this.committer.hashUpper(rel))?.oid) !== expected) {
      throw fsError('EBUSY', `${rel} changed in ${this.name} while this ran; nothing was written: run it again`);
    }
    const refusal = this.space.refusal(content.length - (node?.stat?.size ?? 0));
    if (refusal) throw fsError(refusal, `${rel}: the branch is over its quota (branch_quota_bytes)`);
    if (node?.stat) this.space.used -= node.stat.size;
    await this.place(rel, 'file', content);
    await this.sync();
  }

  /** Control-API writes take a path, not a kernel lookup: refuse one that leads through a symbolic link. */
  private async realParents(rel: string): Promise<void> {
    const parts = rel.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      const node = await this.overlay.resolve(dir);
      if (!node) return;
      if (node.stat ? node.stat.isSymbolicLink() : node.entry.mode === MODE.link) throw fsError('ELOOP', `${dir} is a symbolic link; nothing is written through it`);
      if (!isDir(node)) throw fsError('ENOTDIR', `${dir} is not a directory`);
    }
  }

  private async place(rel: string, kind: Exclude<TrashKind, 'dir'>, content: Buffer, replace = true): Promise<void> {
    await this.copy.place(rel, kind, content, replace);
    this.committer.markDirty(rel);
  }

  /** Move the view to a commit made from its head (main merged into it): advance.ts. */
  advance(make: MakeCommit): Promise<string | null> {
    return advance({ ...this.ctx, name: this.name, overlay: this.overlay, committer: this.committer, space: this.space }, make);
  }

  /** Commit what is pending and stop the batching timer. */
  async close(): Promise<void> {
    await this.sync();
    this.committer.stop();
    await this.deletions.close();
    await this.reads.close();
    await this.upperRoot.close();
    this.space.release();
  }
}

/** A scratch root must be a real directory: whatever else stands there (a symlink swapped in) is replaced. */
async function realDirectory(dir: string): Promise<void> {
  const st = await fs.lstat(dir).catch(() => null);
  if (st && !st.isDirectory()) await fs.rm(dir, { force: true });
  await fs.mkdir(dir, { recursive: true });
}
