import { UserError } from '../util/errors.js';
import { parseDuration } from '../util/duration.js';
import { validateBranch, validateRelPath } from '../util/names.js';
import { byDeletion, contentsOf, newestFirst, type TrashRecord } from '../trash/trash.js';
import { parseMeta } from '../store/file-meta.js';
import type { HomeSet } from '../homes/home-set.js';
import type { TrashListed, TrashPurged, TrashRestored } from '../api/types.js';
import type { Credentials } from '../api/credentials.js';
import { DeletedAccess } from '../cow/deleted-access.js';
import type { LeaseService } from './leases.js';
import type { Readers } from './readers.js';

/** The recycle area through the control API: list and restore (each as the caller may), purge what is older than asked. */
export class TrashWorkflow {
  constructor(private readonly homes: HomeSet, private readonly leases: LeaseService, private readonly readers: Readers) {}

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
   * The recycle area, newest first, by deletion (trash.ts byDeletion), with the deletions branches have logged but not filed yet (their commit
   * has not landed), marked `pending`: a list right after `rm` shows the file. Pending ones are read first,
   * so one whose commit lands meanwhile is found filed (and shown once), never lost between the two. A caller
   * who is not the owner is shown only what it could have read through the view it was deleted from
   * (deleted-access.ts): a run as its user, a lease holder as its principal, anyone else what everyone may read.
   */
  async trashList(role: string, creds: Credentials): Promise<TrashListed[]> {
    const pending = this.homes.branchViews(role).flatMap((v) => v.pendingDeletions());
    const filed: TrashListed[] = await this.homes.mounted(role).home.trash.list();
    const ids = new Set(filed.map((r) => r.id));
    const all = [...filed, ...pending.filter((r) => !ids.has(r.id)).map((r): TrashListed => ({ ...r, pending: true }))];
    const mayRead = await this.mayRead(role, creds, all);
    const shown: TrashListed[] = [];
    for (const r of all) if (!mayRead || (await mayRead(r))) shown.push(r);
    // One entry per deletion: a folder with what went with it (the CLI and the page list those as one).
    return byDeletion(shown.sort(newestFirst));
  }

  /** Whether the caller could have read a deleted path (undefined: the owner, who reads everything). */
  private async mayRead(role: string, creds: Credentials, records: TrashRecord[]): Promise<((r: TrashRecord) => Promise<boolean>) | undefined> {
    const { reader } = await this.readers.of(role, creds);
    if (!reader) return undefined;
    const m = this.homes.mounted(role);
    const store = m.home.store;
    const access = new DeletedAccess(reader, {
      store, mainTree: (await store.readCommit(await m.home.mainHead())).tree, owner: this.homes.viewShare(role).owner,
      views: new Map([...m.branches]), records,
    });
    return (r) => access.mayRead(r);
  }

  /**
   * Restore a deleted path into a branch: the newest record for the path (from the given branch when named),
   * or the record with the given id. The write lease on the branch it goes into (or the owner) is checked first,
   * from the request and the record, before anything is committed; a deletion still pending is filed then (its
   * branch commits), and the recycle area is read once. A caller who is not the owner must also have been able to
   * read it, and all that goes with it, where it was deleted (what `nas trash list` does not show it, it cannot
   * restore): checked once the records are known, before anything is restored.
   *
   * A folder comes back whole: with everything deleted with it in one operation (trash.ts contentsOf). Each path
   * gets back its recorded mode, owner and times; a folder's are set last, once its contents are in. Refuses to
   * overwrite anything that exists unless told where to put it.
   */
  async trashRestore(role: string, opts: { path?: string; id?: string; branch?: string; to?: string }, creds: Credentials): Promise<TrashRestored> {
    const trash = this.homes.mounted(role).home.trash;
    const target = opts.to ? validateRelPath(opts.to) : undefined;
    const { record, listed } = await this.toRestore(role, opts, creds);
    // Shallow first, so each directory is there before what goes in it.
    const all = [record, ...contentsOf(record, listed)].sort((a, b) => depth(a.path) - depth(b.path));
    const mayRead = await this.mayRead(role, creds, listed);
    for (const r of all) {
      if (mayRead && !(await mayRead(r))) {
        throw new UserError(`you could not read ${r.path} through ${role}@${r.branch} when it was deleted, so it is not restored; the owner can restore it`, 403);
      }
    }
    const view = this.homes.branch(role, opts.branch ?? record.branch);
    const to = target ?? record.path;
    if (await view.exists(to)) {
      throw new UserError(`${to} exists in ${view.name}; nothing was changed. Pass --to <path> to restore it elsewhere`, 409);
    }
    const moved = (r: TrashRecord) => to + r.path.slice(record.path.length);
    for (const r of all) {
      const meta = r.meta ? parseMeta(r.meta) : null;
      await view.restore(moved(r), r.kind, await trash.content(r), { commit: false, meta: r.kind === 'dir' ? null : meta });
    }
    // Directories last, deepest first: putting a file in moves its folder's times.
    for (const r of all.filter((x) => x.kind === 'dir').reverse()) {
      const meta = r.meta ? parseMeta(r.meta) : null;
      if (meta) await view.dirMeta(moved(r), meta);
    }
    await view.sync();
    // What came back is marked so (the list shows it restored, not waiting), each where it went.
    await trash.markRestored(all, { branch: opts.branch ?? record.branch, to: moved });
    return { restored: record, to, view: view.name, head: view.head, contents: all.slice(1).map(moved).sort() };
  }

  /**
   * The record a restore takes, and the recycle area as read once for it, the caller authorized on the way: the
   * branch it names at once, else the record's, found among the pending deletions or the area without committing.
   */
  private async toRestore(role: string, opts: { path?: string; id?: string; branch?: string }, creds: Credentials): Promise<{ record: TrashRecord; listed: TrashRecord[] }> {
    const trash = this.homes.mounted(role).home.trash;
    const path = opts.path ? validateRelPath(opts.path) : undefined;
    if (!path && !opts.id) throw new UserError('name the path to restore (or --id from nas trash list)');
    const matches = (r: TrashRecord) => (opts.id ? r.id === opts.id : r.path === path && (!opts.branch || r.branch === opts.branch));
    const notFound = () => {
      const what = opts.id ? `id ${opts.id}` : `${path}${opts.branch ? ` deleted from ${opts.branch}` : ''}`;
      return new UserError(`nothing in the recycle area of ${role} matches ${what}; see nas trash list ${role}`, 404);
    };
    if (opts.branch) await this.authorize(role, opts.branch, creds);
    // Deletions not filed yet: their branches commit only once the caller may restore.
    const pendingIn = this.homes.branchViews(role).filter((v) => v.pendingDeletions().some(matches));
    let listed = pendingIn.length > 0 ? undefined : await trash.list();
    const found = listed ? listed.find(matches) : pendingIn.flatMap((v) => v.pendingDeletions().filter(matches)).sort(newestFirst)[0];
    if (!found) throw notFound();
    const branch = opts.branch ?? (await this.authorize(role, found.branch, creds));
    if (!listed) {
      for (const view of pendingIn) await view.sync();
      listed = await trash.list();
    }
    const record = listed.find(matches);
    if (!record) throw notFound();
    // A filed deletion newer than the pending one, from another branch: that branch is the one written into.
    if (!opts.branch && record.branch !== branch) await this.authorize(role, record.branch, creds);
    return { record, listed };
  }

  /** A write lease on the branch a restore goes into, or the owner; main takes no restore (it changes by merge). */
  private async authorize(role: string, branch: string, creds: Credentials): Promise<string> {
    if (branch === 'main') throw new UserError('main is protected: restore into a branch (--branch <name>) and merge it');
    validateBranch(branch);
    await this.leases.authorize(role, branch, 'write', creds, `restoring from the recycle area in ${role}/${branch}`);
    return branch;
  }
}

const depth = (p: string): number => p.split('/').length;
