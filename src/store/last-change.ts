import { ChangeTable } from './change-table.js';
import { GitCommands } from './git-commands.js';
import { LastChangeWalk, type CommitReader } from './last-change-walk.js';
import { MAIN_REF } from './refs.js';

/** What the lookup needs of the Store: its objects, its directory (git runs there, the table is kept there) and main. */
export interface LastChangeStore extends CommitReader {
  readonly path: string;
  readRef(name: string): Promise<string | null>;
}

/** Tables kept in memory (each one entry per path of its tree): main's head, the one before, branches' heads. */
const MAX_TABLES = 4;
/** How far down a commit's first-parent line a kept table is looked for; further, the commit is walked lazily. */
const MAX_STEPS = 1000;
/** Commits known to have no table (views of older commits), so a getattr does not look again. */
const MAX_WALKED = 256;

/**
 * When each path last changed, as of a commit: the time of the newest commit on the first-parent line whose
 * tree holds something else at that path than its first parent's (a merge counts as the change it brought
 * into that line; a folder changes when anything below it does, deletions included). Unrelated commits leave a
 * path's time alone, so `make` and `rsync` see no change where there was none.
 *
 * Main's head and every commit whose first-parent line reaches a kept table within MAX_STEPS commits (a branch
 * on main, main's next head after a merge) read a ChangeTable: built in one pass over main's history the first
 * time, kept in the Store's directory (`nas-last-change`) so a restart does not redo it, and advanced by the
 * commits since instead of rebuilt. Any other commit (a view of an older one) is walked lazily (LastChangeWalk).
 */
export class LastChange {
  private readonly walk: LastChangeWalk;
  private gitCommands: GitCommands | null = null;
  /** The table of main's head as last seen: never pushed out by branches' tables. */
  private main: ChangeTable | null = null;
  /** Other tables, least recently used first: main's former heads, branches' heads. */
  private readonly tables = new Map<string, ChangeTable>();
  private readonly walked = new Set<string>();
  private readonly making = new Map<string, Promise<ChangeTable | null>>();
  private saved: Promise<void> | null = null;

  constructor(private readonly store: LastChangeStore) {
    this.walk = new LastChangeWalk(store);
  }

  /** Made when first needed: the Store makes its LastChange before its own fields are set. */
  private get git(): GitCommands {
    return (this.gitCommands ??= new GitCommands(this.store.path));
  }

  private get file(): string {
    return `${this.store.path}/nas-last-change`;
  }

  /**
   * Start making the table of main's new head `oid` now (at a Home's mount, after a merge), so that the first
   * listing finds it made rather than waits for it.
   */
  prepare(oid: string): void {
    if (!this.kept(oid)) void this.tableOf(oid);
  }

  /** Seconds since the epoch at which `rel` last changed as of commit `oid`; null where it is not in that commit. */
  async timeOf(oid: string, rel: string): Promise<number | null> {
    if (rel === '') return this.walk.commitTime(oid);
    const table = this.walked.has(oid) ? null : this.kept(oid) ?? (await this.tableOf(oid));
    return table ? table.times.get(rel) ?? null : this.walk.timeOf(oid, rel);
  }

  /** A table in memory for `oid`, marked as just used. */
  private kept(oid: string): ChangeTable | null {
    if (this.main?.commit === oid) return this.main;
    const table = this.tables.get(oid);
    if (!table) return null;
    this.tables.delete(oid);
    this.tables.set(oid, table);
    return table;
  }

  /** The table of `oid`, made once however many ask at once; null for a commit walked lazily (or a failed git). */
  private tableOf(oid: string): Promise<ChangeTable | null> {
    let p = this.making.get(oid);
    if (!p) {
      p = this.makeTable(oid).catch(() => null);
      this.making.set(oid, p);
      void p.then((table) => {
        this.making.delete(oid);
        if (table) return;
        this.walked.add(oid);
        if (this.walked.size > MAX_WALKED) this.walked.delete(this.walked.values().next().value!);
      });
    }
    return p;
  }

  private async makeTable(oid: string): Promise<ChangeTable | null> {
    await (this.saved ??= this.loadSaved());
    const base = this.kept(oid) ?? (await this.keptOnLine(oid));
    if (base?.commit === oid) return base;
    const main = await this.store.readRef(MAIN_REF);
    if (!base && oid !== main) return null;
    const table = base ? await base.advance(this.git, await this.walk.commit(oid), (t, p) => this.store.lookupPath(t, p)) : await ChangeTable.build(this.git, oid);
    if (oid !== main) {
      this.tables.set(oid, table);
      if (this.tables.size > MAX_TABLES) this.tables.delete(this.tables.keys().next().value!);
      return table;
    }
    // Main's former table stays a while for the branches still on it; the new one is what is kept on disk
    // (the listing does not wait for the save).
    if (this.main) this.tables.set(this.main.commit, this.main);
    this.main = table;
    void table.save(this.file).catch(() => undefined);
    return table;
  }

  /** The nearest table in memory on `oid`'s first-parent line, within MAX_STEPS commits. */
  private async keptOnLine(oid: string): Promise<ChangeTable | null> {
    if (!this.main && this.tables.size === 0) return null;
    let cur = oid;
    for (let step = 0; step < MAX_STEPS; step++) {
      const parent = (await this.walk.commit(cur)).parents[0];
      if (!parent) return null;
      const kept = this.kept(parent);
      if (kept) return kept;
      cur = parent;
    }
    return null;
  }

  /** The table the last run kept, if its commit is still in the Store: what the first listing after a restart starts from. */
  private async loadSaved(): Promise<void> {
    const table = await ChangeTable.load(this.file);
    if (table && (await this.walk.commit(table.commit).then(() => true, () => false))) this.main = table;
  }
}
