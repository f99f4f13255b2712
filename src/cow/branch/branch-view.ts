import fs from 'node:fs/promises';
import { constants } from 'node:fs';
import type { Logger } from 'pino';
import { fsError } from '../../util/errors.js';
import { MODE, type Identity, type Store } from '../../store/store.js';
import { branchRef } from '../../store/refs.js';
import type { Trash, TrashKind, TrashRecord } from '../../trash/trash.js';
import { type Rules } from '../../policy/policy.js';
import { attrFromStats, gitIno, type Attr, type Owner } from '../attr.js';
import { inboxPlace, type OwnerShare } from '../owner-share.js';
import { LeaseAccess } from './lease-access.js';
import type { Caller } from '../../util/owner.js';
import { GitLayer } from '../git-layer.js';
import * as fsx from '../fsx.js';
import type { GrantDesk, Handle, TimeArg, WritableView } from '../view.js';
import { Committer } from './committer.js';
import { ControlWrites, type RestoreOptions } from './control-writes.js';
import type { FileMeta } from '../../store/file-meta.js';
import { advance, type MakeCommit } from './advance.js';
import { CopyUp } from './copy-up.js';
import { DataPath } from './data-path.js';
import { Deletions } from './deletions.js';
import { Names } from './names.js';
import { Overlay } from './overlay.js';
import { ReadManifest } from './read-manifest.js';
import type { Space } from './space.js';
import { BranchState } from './state.js';
import { chmodNoFollow, fdPath } from '../../util/beneath.js';
import { mkdirExact, realDirectory } from '../../util/exact-mode.js';

export interface BranchContext {
  role: string;
  branch: string;
  store: Store;
  trash: Trash;
  identity: Identity;
  owner: Owner;
  /** Whether the kernel checks ACLs on this mount: without them the write leases' principals share nothing. */
  acls?: boolean;
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

/**
 * A writable branch of a Home: the branch's head commit in git, overlaid by an upper directory of files
 * written since, minus whiteouts for what was deleted. Unchanged files are served from git objects; the
 * first write copies a file up. Closed and fsynced files become commits; scratch paths (workspace/) stay in
 * the upper directory only.
 *
 * This class answers the syscalls, each in a few steps over its parts: the overlay (what a path is), copy-up,
 * deletions (logged before they happen), the committer (dirty paths into commits), names (mkdir, link, unlink,
 * rename) and the data path (open files). What the view knows of itself (open writers, dirty paths, whiteouts,
 * expiry, bytes used) is one state object (state.ts) that it owns and its parts ask through narrow methods.
 */
export class BranchView implements WritableView {
  readonly kind = 'branch' as const;
  readonly name: string;
  /** What the run read from git through this view (SPEC.md, Agent Branch, requirement 4). */
  reads!: ReadManifest;
  private readonly state: BranchState;
  private readonly overlay: Overlay;
  private readonly copy: CopyUp;
  private readonly deletions: Deletions;
  private readonly committer: Committer;
  private readonly names: Names;
  private readonly files: DataPath;
  private readonly control: ControlWrites;
  private readonly quotaBytes: number;
  private readonly leases: LeaseAccess;

  private constructor(
    private readonly ctx: BranchContext,
    layer: GitLayer,
    private readonly scratchRoots: string[],
    /** The upper directory, held open: its paths go through this descriptor (see open). */
    private readonly upperRoot: fs.FileHandle,
  ) {
    this.name = `${ctx.role}@${ctx.branch}`;
    this.quotaBytes = ctx.quotaBytes;
    this.leases = new LeaseAccess(ctx.owner, ctx.acls ?? true);
    this.state = new BranchState(ctx.quotaBytes, ctx.homeSpace);
    const short = fdPath(upperRoot.fd);
    this.overlay = new Overlay(`${ctx.dir}/upper`, short, ctx.rules, layer, this.state, () => this.committer.ignoreRulesChanged());
    this.copy = new CopyUp(this.overlay, ctx.store, `${ctx.dir}/tmp`, () => this.reads, this.state, () => this.ctx.owner);
    this.deletions = new Deletions(this.overlay, this.state, `${ctx.dir}/deleted`, `${ctx.dir}/pending.jsonl`);
    this.committer = new Committer({ ...ctx, name: this.name }, this.overlay, this.deletions, this.state);
    this.files = new DataPath(this.overlay, this.copy, this.committer, this.state, () => this.reads, (uid) => this.changedBy(uid));
    this.names = new Names(
      { store: ctx.store, branch: ctx.branch, runId: ctx.runId }, this.overlay, this.copy, this.deletions, this.committer, this.state, this.files,
    );
    this.control = new ControlWrites(this.name, this.overlay, this.copy, this.committer, this.state, () => this.sync());
  }

  /** Open a branch view, recovering what a crash left: uncommitted upper files and pending deletions. */
  static async open(ctx: BranchContext, scratchRoots: string[]): Promise<BranchView> {
    const upper = `${ctx.dir}/upper`;
    await mkdirExact(upper, 0o755, 0o700); // the view's root: 0755 as main's (nasd's umask keeps the rest its own)
    await fs.mkdir(`${ctx.dir}/deleted`, { recursive: true });
    // A scratch root must be a real directory.
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
   * The write leases in force: their principals share the owner's rights here (owner-share.ts), the newest one
   * owns the scratch roots, and its budget caps the branch's quota. `inForce`: every write lease in force, newest
   * first, with its principal's account (null: no local one). True when what the kernel was told of the view's
   * permissions (modes, ACLs, the scratch roots' owner) changed.
   */
  async setLease(
    lease: { owner: Owner | null; budgetBytes?: number } | null, inForce: { id: string; owner: Owner | null }[] = [],
  ): Promise<boolean> {
    this.files.setLeases(inForce.map((l) => l.id));
    const changed = this.leases.apply(inForce.map((l) => l.owner));
    this.state.usage.limit = Math.min(this.quotaBytes, lease?.budgetBytes ?? Infinity);
    await this.giveRootsToOwner();
    return changed;
  }

  /**
   * The view's root belongs to the Home's owner, as in main (the writers share it). The scratch roots belong to
   * the newest write lease's principal: served by the kernel straight from disk (no ACL, no mayWrite), only their
   * owner may enter them (0700): once a lease ends, what its principal made in workspace/ is out of its reach.
   */
  private async giveRootsToOwner(): Promise<void> {
    await fs.lchown(this.overlay.up(''), this.ctx.owner.uid, this.ctx.owner.gid);
    const scratchOwner = this.leases.scratchOwner;
    for (const { dir } of this.scratchDirs()) {
      // Through a descriptor: a mode is never given to what a symbolic link put there points to.
      const fh = await fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      try {
        await fh.chown(scratchOwner.uid, scratchOwner.gid);
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

  /** Whether uid may change the view at all (lease-access.ts). */
  mayWrite(uid: number): boolean {
    return this.leases.mayWrite(uid);
  }

  get owner(): Owner {
    return this.ctx.owner;
  }

  /** Who owns what has no record, and who shares its rights here. */
  get share(): OwnerShare {
    return this.leases.share;
  }

  /** The run the branch was created for (--run), if any. */
  get run(): string | undefined {
    return this.ctx.runId;
  }

  /** The bytes the branch holds (usage.ts says what counts) against its quota, or its write lease's budget when lower. */
  get quota(): { used: number; limit: number } {
    const { used, limit } = this.state.usage;
    return { used, limit };
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

  /** Deletions logged but not yet filed in the recycle area (their commit has not landed). */
  pendingDeletions(): TrashRecord[] {
    return this.deletions.batch().map((d) => ({ ...d.record }));
  }

  private async recover(): Promise<void> {
    await this.deletions.recover();
    // Scratch roots are skipped: nothing there is committed, and workspace/ may be large (node_modules...).
    await this.overlay.walkUpper('', (rel, st) => {
      if (!st.isDirectory()) this.state.usage.set(rel, st.size);
      if ((st.isFile() || st.isSymbolicLink()) && !this.overlay.scratch(rel)) this.state.markDirty(rel);
    }, (rel) => !this.scratchRoots.includes(rel));
    if (this.pendingChanges > 0) {
      // Files looked at, not changed: the commit's line (info only if something changed) says that.
      this.ctx.log.debug({ view: this.name, files: this.state.dirtyCount, deletions: this.deletions.count }, 'recovering: committing what the last run left on disk');
      this.committer.schedule(0);
    }
  }

  // ---- reading -----------------------------------------------------------------------------------

  /** The attributes as the kernel is told them (the inbox its owner's alone, its ACL's mask as the group bits: owner-share.ts). */
  async getattr(rel: string): Promise<Attr> {
    return this.leases.share.shown(await this.ownAttr(rel), inboxPlace(rel));
  }

  /** rel's access ACL (the writers' entries), or null when its mode says it all. */
  async acl(rel: string): Promise<Buffer | null> {
    return this.leases.share.acl(await this.ownAttr(rel), inboxPlace(rel));
  }

  /** rel's own attributes, as set (what the kernel is shown of the inbox is getattr's). */
  private async ownAttr(rel: string): Promise<Attr> {
    const st = await this.overlay.statNs(rel);
    // Git keeps no owners or times: what the branch has not changed shows the Home's owner and its last change.
    const node = st ? null : await this.overlay.gitNode(rel);
    if (!st && !node) throw fsError('ENOENT');
    return st ? attrFromStats(st) : await this.overlay.layer.attr(rel, node!.entry!, this.ctx.owner, gitIno(this.name, rel));
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

  // ---- open files (see data-path.ts) -------------------------------------------------------------

  open(rel: string, flags: number): Promise<Handle> {
    return this.files.open(rel, flags);
  }

  create(rel: string, mode: number, caller?: Caller | null): Promise<Handle> {
    return this.files.create(rel, mode, caller);
  }

  offerWrites(h: Handle, fh: number, desk: GrantDesk, uid: number): void {
    this.files.offerWrites(h, fh, desk, uid);
  }

  read(h: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    return this.files.read(h, buf, len, pos);
  }

  write(h: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    return this.files.write(h, buf, len, pos);
  }

  /** The last close of a file: what it wrote joins the next commit. */
  release(h: Handle): Promise<void> {
    return this.files.release(h);
  }

  /** Returns once the file's content is on disk and every pending change of the branch is a commit. */
  fsync(h: Handle | null): Promise<void> {
    return this.files.fsync(h);
  }

  truncate(rel: string, size: number): Promise<void> {
    return this.files.truncate(rel, size);
  }

  ftruncate(h: Handle, size: number): Promise<void> {
    return this.files.ftruncate(h, size);
  }

  /** The branch's TTL passed: what is pending is committed, and from now on every change is EROFS. */
  async expire(why: string): Promise<void> {
    if (this.state.expired) return;
    await this.sync();
    this.state.expire(why);
    this.files.revokeGrants();
  }

  /** The owner extended an expired branch's TTL: it takes writes again (the leases that ended stay ended). */
  reopen(): void {
    this.state.reopen();
  }

  get expired(): boolean {
    return this.state.expired;
  }

  /** Being discarded, out of the mount: what is open in it writes and fsyncs nothing more (EIO). null: it stays after all. */
  discarding(why: string | null): void {
    this.state.discard(why);
    this.files.revokeGrants();
  }

  // ---- metadata ----------------------------------------------------------------------------------

  async chmod(rel: string, mode: number): Promise<void> {
    await this.overlay.check('chmod', rel);
    // The group bits the kernel sends are the shown ones (a shared inbox's ACL mask), read before the copy-up.
    const kept = this.leases.share.chmodded(await this.ownAttr(rel), inboxPlace(rel), mode);
    await this.copy.materialise(rel, await this.overlay.need(rel));
    await this.overlay.tree.at(rel, (p) => chmodNoFollow(p, kept & 0o7777));
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
    // Files still open include what they wrote so far: the kernel sends the release of a closed file asynchronously.
    this.files.queueOpen();
    return this.committer.flushNow();
  }

  // ---- control API -------------------------------------------------------------------------------

  /** The branch's policy rules (what a restore into it must respect too). */
  get rules(): Rules {
    return this.overlay.rules;
  }

  async exists(rel: string): Promise<boolean> {
    return (await this.overlay.resolve(rel)) !== null;
  }

  /** Put content back at rel, from the recycle area or an older commit (see control-writes.ts). */
  restore(rel: string, kind: TrashKind, content: Buffer, options: RestoreOptions = {}): Promise<void> {
    return this.control.restore(rel, kind, content, options);
  }

  /** Give a directory back its recorded mode, owner and times once a restore has filled it (see control-writes.ts). */
  dirMeta(rel: string, meta: FileMeta): Promise<void> {
    return this.control.dirMeta(rel, meta);
  }

  /** A regular file with generated content, committed (see control-writes.ts). */
  writeFile(rel: string, content: Buffer, expected?: string | null): Promise<void> {
    return this.control.writeFile(rel, content, expected);
  }

  /** Move the view to a commit made from its head (main merged into it): advance.ts. */
  advance(make: MakeCommit): Promise<string | null> {
    return advance({ ...this.ctx, name: this.name, overlay: this.overlay, state: this.state, sync: () => this.sync() }, make);
  }

  /** Commit what is pending and stop the batching timer. */
  async close(): Promise<void> {
    this.files.revokeGrants(true);
    await this.sync();
    this.committer.stop();
    await this.deletions.close();
    await this.reads.close();
    await this.upperRoot.close();
    this.state.usage.release();
  }
}
