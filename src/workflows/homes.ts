import fs from 'node:fs/promises';
import { UserError } from '../util/errors.js';
import { validateRole } from '../util/names.js';
import { Store, type Identity } from '../store/store.js';
import { LeaseStore } from '../lease/lease-store.js';
import { PrStore } from '../merge/pr-store.js';
import { Home } from '../home/home.js';
import { adoptRepository, exportHome, importHome } from '../home/portable.js';
import { archiveDirFor, moveFromArchive, moveToArchive } from '../home/lifecycle.js';
import { defaultTemplate } from '../home/template.js';
import { holdForReview } from '../merge/adopt-review.js';
import { MAIN_REF } from '../store/refs.js';
import type { HomeSet, Mounted } from '../homes/home-set.js';
import type { Branches } from './branches.js';
import type { Exported, HomeSummary, Imported, StatusReport } from '../api/types.js';
import { meter } from '../metrics/meter.js';
import { stillMerged } from './finished-work.js';

/** Homes through the control API: create, list, export, import, archive and unarchive; nasd's status. */
export class Homes {
  constructor(private readonly homes: HomeSet, private readonly branches: Branches) {}

  /** A request may have changed this Home's views (every Home's when null): the mount forgets what it kept. */
  viewsChanged(role: string | null): Promise<void> {
    return this.homes.viewsChanged(role);
  }

  /** What `nas status` says of the Homes alone (status.ts adds waiting PRs and problems). */
  status(): Omit<StatusReport, 'version' | 'started' | 'problems' | 'homes'> & { homes: HomeSummary[] } {
    return {
      mount: this.homes.opts.mount, state_dir: this.homes.opts.stateDir, pid: process.pid,
      ...(meter.url ? { metrics: meter.url } : {}), homes: this.listHomes(),
    };
  }

  async createHome(role: string, template: string | undefined, owner: string): Promise<HomeSummary> {
    validateRole(role);
    if (this.homes.archived.has(role)) throw new UserError(`an archived Home is named "${role}"; choose another name, or nas home unarchive ${role}`, 409);
    const home = await Home.create(this.homes.opts.stateDir, role, { template, templatesDir: this.homes.opts.templatesDir, owner, identity: this.homes.opts.identity });
    const m = await this.homes.open(home);
    return this.describeHome(m);
  }

  /**
   * The whole Home in one file (a git bundle), after committing what every branch has pending; an archived Home
   * exports from its archived Store, as it was left.
   */
  async exportHome(role: string, file: string): Promise<Exported> {
    const started = process.hrtime.bigint();
    let store: Store;
    if (this.homes.archived.has(role)) store = await Store.open(archiveDirFor(this.homes.opts.stateDir, role));
    else {
      store = this.homes.mounted(role).home.store;
      await this.branches.sync(role);
    }
    const { bytes, refs } = await exportHome(store, file);
    return { role, file, bytes, refs, ms: Math.round(Number(process.hrtime.bigint() - started) / 1e6) };
  }

  /** A Home from an exported file, under its own role or `as`; mounted at once, its branches with it. */
  async importHome(file: string, as?: string): Promise<Imported> {
    const started = process.hrtime.bigint();
    const { stateDir, identity } = this.homes.opts;
    const home = await importHome(stateDir, file, as, identity, (role) => this.homes.archived.has(role), async (store) => {
      await endLeases(store, identity);
      // Its PRs were made in the Home exported, not here: marked so wherever they show.
      await new PrStore(store, identity).markImported(file, new Date().toISOString());
    });
    const m = await this.openNew(home, 'imported');
    const refs = (await home.store.listRefs('refs/')).size;
    return { ...this.describeHome(m), file, refs, ms: Math.round(Number(process.hrtime.bigint() - started) / 1e6) };
  }

  /**
   * A Home from a git repository elsewhere, its default branch's history as main's with one commit on top that
   * sets `.nas/` to the built-in template's (adopt-review.ts); mounted at once. `upstream` is the repository's head.
   */
  async adoptHome(role: string, source: string, owner: string): Promise<{ summary: HomeSummary; branch: string; upstream: string }> {
    const { stateDir, identity } = this.homes.opts;
    const { home, branch, upstream } = await adoptRepository(stateDir, role, source, identity, (r) => this.homes.archived.has(r),
      (store, head) => holdForReview(store, MAIN_REF, head, defaultTemplate(role, owner, new Date()), identity).then(() => undefined));
    const m = await this.openNew(home, 'adopted');
    // A history's last-change times are made in one pass over it: before the adopt answers, not in the first listing.
    await home.store.lastChange.prepare(m.main.head);
    return { summary: this.describeHome(m), branch, upstream };
  }

  listHomes(): HomeSummary[] {
    const archived = [...this.homes.archived.values()].map((a): HomeSummary => ({ ...a, branches: [], problems: [], state: 'archived' }));
    return [...[...this.homes.all()].map((m) => this.describeHome(m)), ...archived].sort((a, b) => (a.role < b.role ? -1 : 1));
  }

  /** Archive a Home: unmounted, its Store kept as it is under `<state>/archive/` until unarchived. */
  async archiveHome(role: string): Promise<HomeSummary> {
    await this.homes.unmount(role);
    try {
      await moveToArchive(this.homes.opts.stateDir, role);
    } catch (err) {
      await this.homes.open(await Home.open(this.homes.opts.stateDir, role, this.homes.opts.identity));
      throw err;
    }
    await this.homes.noteArchived(role);
    this.homes.opts.log.info({ role }, 'Home archived');
    return this.listHomes().find((h) => h.role === role)!;
  }

  async unarchiveHome(role: string): Promise<HomeSummary> {
    validateRole(role);
    await moveFromArchive(this.homes.opts.stateDir, role);
    this.homes.archived.delete(role);
    const m = await this.homes.open(await Home.open(this.homes.opts.stateDir, role, this.homes.opts.identity));
    this.homes.opts.log.info({ role }, 'Home unarchived');
    return this.describeHome(m);
  }

  /** Mount a Home just made from elsewhere; one that cannot be opened is removed whole. */
  private async openNew(home: Home, how: 'imported' | 'adopted'): Promise<Mounted> {
    try {
      return await this.homes.open(home);
    } catch (err) {
      this.homes.forget(home.role);
      await fs.rm(home.dir, { recursive: true, force: true });
      throw new UserError(`the ${how} Home ${home.role} could not be opened, so nothing was ${how}: ${(err as Error).message}`);
    }
  }

  private describeHome(m: Mounted): HomeSummary {
    return {
      role: m.home.role,
      store: m.home.dir,
      main: m.main.head,
      branches: [...m.branches.keys()],
      ...mergedOf(m),
      problems: m.config.problems,
      state: m.life.retired ? 'retired' : 'active',
      ...(m.life.retired ? { successor: m.life.retired.successor } : {}),
      ...(m.life.predecessor ? { predecessor: m.life.predecessor.role } : {}),
    };
  }
}

/** The branches listed as merged (finished-work.ts), when there are any. */
function mergedOf(m: Mounted): { merged?: string[] } {
  const merged = [...m.branches].filter(([name, view]) => {
    const mark = m.records.get(name)?.merged;
    return mark && stillMerged(view, mark);
  }).map(([name]) => name);
  return merged.length > 0 ? { merged } : {};
}

/**
 * Every lease still in force is recorded as revoked before the Home is mounted: a token issued for the Home that
 * was exported (which may live on, here or elsewhere) must not also work in a copy of it.
 */
async function endLeases(store: Store, identity: Identity): Promise<void> {
  const leases = new LeaseStore(store, identity);
  for (const lease of await leases.list()) {
    if (!lease.revoked && Date.parse(lease.expires) > Date.now()) await leases.revoke(lease.id);
  }
}
