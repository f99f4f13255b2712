import { constants } from 'node:fs';
import { fsError, type FsError } from '../util/errors.js';
import { MODE } from '../store/store.js';
import { checkMutation, DEFAULT_RULES, visibleMode, type Mutation } from '../policy/policy.js';
import { attrFromGit, gitIno, type Attr, type Owner } from './attr.js';
import { GitLayer } from './git-layer.js';
import { contentHandle, readContent, type Handle, type View } from './view.js';

/**
 * The protected main line of a Home, read straight from git objects. It has no mutations at all: policy
 * answers them (EROFS, for every caller including root). Scratch directories (workspace/) never reach
 * main, so they show as empty.
 */
export class MainView implements View {
  readonly kind = 'main' as const;
  private layer: GitLayer;

  constructor(
    readonly name: string,
    layer: GitLayer,
    readonly owner: Owner,
    private readonly scratchRoots: string[],
    /** In a cluster, a branch another host holds, shown read-only here: that host's name. */
    readonly elsewhere?: string,
  ) {
    this.layer = layer;
  }

  /** Point the view at a new main commit (after a merge moved it). */
  setHead(layer: GitLayer): void {
    this.layer = layer;
  }

  get head(): string {
    return this.layer.commit.oid;
  }

  private async entry(rel: string) {
    const e = await this.layer.lookup(rel);
    if (e) return e;
    if (this.scratchRoots.includes(rel)) return { oid: '', mode: MODE.tree };
    throw fsError('ENOENT');
  }

  async getattr(rel: string): Promise<Attr> {
    const e = await this.entry(rel);
    const ino = gitIno(this.name, rel);
    if (e.oid === '') return attrFromGit(MODE.tree, 0, this.layer.time, this.owner, ino);
    const attr = await this.layer.attr(rel, e, this.owner, ino);
    // On main the inbox is for its owner only (the kernel enforces the mode): a run reads untrusted input
    // through its branch. Other reads on main by a run's processes land in the run's manifest (fuse-ops).
    attr.mode = visibleMode(rel, attr.mode);
    return attr;
  }

  async readdir(rel: string): Promise<string[]> {
    const e = await this.entry(rel);
    if (e.mode !== MODE.tree) throw fsError('ENOTDIR');
    if (e.oid === '') return [];
    const names = await this.layer.names(e);
    if (rel === '') for (const s of this.scratchRoots) if (!names.includes(s)) names.push(s);
    return names;
  }

  async readlink(rel: string): Promise<string> {
    const e = await this.entry(rel);
    if (e.mode !== MODE.link) throw fsError('EINVAL');
    return (await this.layer.content(e)).toString();
  }

  async access(rel: string, mode: number): Promise<void> {
    await this.entry(rel);
    if (mode & constants.W_OK) this.refuse('open-write', rel);
  }

  async open(rel: string, flags: number): Promise<Handle> {
    if ((flags & 3) !== constants.O_RDONLY || flags & constants.O_TRUNC) this.refuse('open-write', rel);
    const e = await this.entry(rel);
    if (e.mode === MODE.tree) return contentHandle(rel, Buffer.alloc(0));
    return contentHandle(rel, await this.layer.content(e), e.oid);
  }

  /** Main opens nothing but content from git. */
  async read(h: Handle, buf: Buffer, len: number, pos: number): Promise<number> {
    if (h.mode !== 'content') throw fsError('EBADF');
    return readContent(h, buf, len, pos);
  }

  async release(): Promise<void> {}
  async fsync(): Promise<void> {}

  private refuse(op: Mutation, rel: string): never {
    throw mainRefusal(this, op, rel);
  }
}

/** What any mutation of main gets, as policy decides it (the adapter sends main's mutations here). */
export function mainRefusal(view: { name: string; elsewhere?: string }, op: Mutation, rel: string): FsError {
  const code = checkMutation('main', DEFAULT_RULES, op, rel) ?? 'EROFS';
  if (view.elsewhere) {
    return fsError('EROFS', `${view.name} is held by host ${view.elsewhere} and shown here read-only at its last pushed head: write in it on ${view.elsewhere}, ` +
      `or bring it here with nas branch move ${view.name} --to <this host>`);
  }
  const colon = view.name.indexOf(':');
  if (colon > 0) return fsError(code, `${view.name} is history (a checkpoint or a commit), read-only; to work from it: nas restore ${view.name.slice(0, colon)}@<branch> ${view.name.slice(colon + 1)}`);
  return fsError(code, `${view.name} is main, the protected main line, read-only: write in a branch, e.g. ${view.name}@<branch> under the mount (nas branch create ${view.name}/<branch> makes one)`);
}
