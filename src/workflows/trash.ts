import { UserError } from '../util/errors.js';
import { parseDuration } from '../util/duration.js';
import { validateRelPath } from '../util/names.js';
import { contentsOf, newestFirst, type TrashRecord } from '../trash/trash.js';
import { parseMeta } from '../store/file-meta.js';
import type { HomeSet } from '../homes/home-set.js';
import type { TrashListed, TrashPurged, TrashRestored } from '../api/types.js';

/** The recycle area through the control API: list, restore into a branch, purge what is older than asked. */
export class TrashWorkflow {
  constructor(private readonly homes: HomeSet) {}

  /**
   * Empty the recycle area of what was deleted before the cutoff (default: the Home's trash_keep_days ago);
   * `--older-than 0d` means everything deleted until now.
   */
  async trashPurge(role: string, olderThan?: string): Promise<TrashPurged> {
    const m = this.homes.mounted(role);
    const seconds = olderThan !== undefined ? parseDuration(olderThan, { allowZero: true }) : m.config.maintenance.trash_keep_days * 86400;
    const cutoff = new Date(Date.now() - seconds * 1000);
    const purged = await m.home.trash.purge(cutoff);
    if (purged.length > 0) this.homes.opts.log.info({ role, purged: purged.length, cutoff: cutoff.toISOString() }, 'recycle area purged');
    return { cutoff: cutoff.toISOString(), purged };
  }

  /**
   * The recycle area, newest first, with the deletions branches have logged but not filed yet (their commit
   * has not landed), marked `pending`: a list right after `rm` shows the file. Pending ones are read first,
   * so one whose commit lands meanwhile is found filed (and shown once), never lost between the two.
   */
  async trashList(role: string): Promise<TrashListed[]> {
    const pending = this.homes.branchViews(role).flatMap((v) => v.pendingDeletions());
    const filed: TrashListed[] = await this.homes.mounted(role).home.trash.list();
    const ids = new Set(filed.map((r) => r.id));
    const all = [...filed, ...pending.filter((r) => !ids.has(r.id)).map((r): TrashListed => ({ ...r, pending: true }))];
    return all.sort(newestFirst);
  }

  /** The branch a restore would write into (for the caller's authorization): --branch, else where the file was deleted. */
  async trashTarget(role: string, opts: { path?: string; id?: string; branch?: string }): Promise<string> {
    if (opts.branch) return opts.branch;
    const record = await this.findTrash(role, opts);
    return record.branch;
  }

  private async findTrash(role: string, opts: { path?: string; id?: string; branch?: string }): Promise<TrashRecord> {
    const m = this.homes.mounted(role);
    const path = opts.path ? validateRelPath(opts.path) : undefined;
    if (!path && !opts.id) throw new UserError('name the path to restore (or --id from nas trash list)');
    const matches = (r: TrashRecord) => (opts.id ? r.id === opts.id : r.path === path && (!opts.branch || r.branch === opts.branch));
    // A deletion still pending is filed first (its branch commits now), so what `nas trash list` shows can be restored.
    const pending = this.homes.branchViews(role).filter((v) => v.pendingDeletions().some(matches));
    for (const view of pending) await view.sync();
    const record = (await m.home.trash.list()).find(matches);
    if (!record) {
      const what = opts.id ? `id ${opts.id}` : `${path}${opts.branch ? ` deleted from ${opts.branch}` : ''}`;
      throw new UserError(`nothing in the recycle area of ${role} matches ${what}; see nas trash list ${role}`, 404);
    }
    return record;
  }

  /**
   * Restore a deleted path into a branch: the newest record for the path (from the given branch when named),
   * or the record with the given id. A folder comes back whole: with everything deleted with it in one
   * operation (trash.ts contentsOf). Each path gets back its recorded mode, owner and times; a folder's are set
   * last, once its contents are in. Refuses to overwrite anything that exists unless told where to put it.
   */
  async trashRestore(role: string, opts: { path?: string; id?: string; branch?: string; to?: string }): Promise<TrashRestored> {
    const m = this.homes.mounted(role);
    const record = await this.findTrash(role, opts);
    const branch = opts.branch ?? record.branch;
    if (branch === 'main') throw new UserError('main is protected: restore into a branch (--branch <name>) and merge it');
    const view = this.homes.branch(role, branch);
    const target = opts.to ? validateRelPath(opts.to) : record.path;
    if (await view.exists(target)) {
      throw new UserError(`${target} exists in ${role}@${branch}; nothing was changed. Pass --to <path> to restore it elsewhere`, 409);
    }
    const trash = m.home.trash;
    // Shallow first, so each directory is there before what goes in it.
    const all = [record, ...contentsOf(record, await trash.list())].sort((a, b) => depth(a.path) - depth(b.path));
    const to = (r: TrashRecord) => target + r.path.slice(record.path.length);
    for (const r of all) {
      const meta = r.meta ? parseMeta(r.meta) : null;
      await view.restore(to(r), r.kind, await trash.content(r), { commit: false, meta: r.kind === 'dir' ? null : meta });
    }
    // Directories last, deepest first: putting a file in moves its folder's times.
    for (const r of all.filter((x) => x.kind === 'dir').reverse()) {
      const meta = r.meta ? parseMeta(r.meta) : null;
      if (meta) await view.dirMeta(to(r), meta);
    }
    await view.sync();
    return { restored: record, to: target, view: view.name, head: view.head, contents: all.slice(1).map(to).sort() };
  }
}

const depth = (p: string): number => p.split('/').length;
