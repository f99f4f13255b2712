import { ChangeTable } from './change-table.js';
import { GitCommands } from './git-commands.js';
import { LastChangeWalk, type CommitReader } from './last-change-walk.js';
import { MAIN_REF } from './refs.js';

/** What the lookup needs of the Store: its objects, its directory (git runs there, the table is kept there) and main. */
export interface LastChangeStore extends CommitReader {
  readonly path: string;
  readRef(name: string): Promise<string | null>;
}

/**
 * Paths the tables in memory besides main's may hold together (each table one entry per path of its tree, about
 * 40 bytes): main's former heads, branches' heads, older commits' views; least recently used out first.
 */
const MAX_OTHER_PATHS = 250_000;
/** How far down a commit's first-parent line a kept table is looked for; further, a table is made in one pass. */
const MAX_STEPS = 1000;
/** Commits whose table git could not make (walked lazily instead), so a getattr does not try again. */
const MAX_WALKED = 256;

/**
 * When each path last changed, as of a commit: the time of the newest commit on the first-parent line whose
 * tree holds something else at that path than its first parent's (a merge counts as the change it brought
 * into that line; a folder changes when anything below it does, deletions included). Unrelated commits leave a
 * path's time alone, so `make` and `rsync` see no change where there was none.
 *
 * Every commit asked about reads a ChangeTable: advanced from a table in memory found on its first-parent line
 * within MAX_STEPS commits (main's next head after a merge, a branch's next commit, a branch on main) by the
 * commits since, else made in one pass over its history (main's first head, a branch forked from an older head
 * of main, a view of an older commit). Main's table is kept in the Store's directory (`nas-last-change`) so a
 * restart does not redo it. Only where git fails is a commit walked lazily (LastChangeWalk).
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
   * Make the table of main's new head `oid` now (at a Home's mount, after a merge, before an adopt answers), so
   * that the first listing finds it made rather than waits for it. Never fails: where git does, the walk answers.
   */
  async prepare(oid: string): Promise<void> {
    if (!this.kept(oid)) await this.tableOf(oid);
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

  /** The table of `oid`, made once however many ask at once; null where git failed (the commit is walked lazily). */
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
    const table = base ? await base.advance(this.git, await this.walk.commit(oid), (t, p) => this.store.lookupPath(t, p)) : await ChangeTable.build(this.git, oid);
    if (oid !== (await this.store.readRef(MAIN_REF))) {
      this.keepOther(table);
      return table;
    }
    // Main's former table stays a while for the branches still on it; the new one is what is kept on disk
    // (the listing does not wait for the save).
    if (this.main) this.keepOther(this.main);
    this.main = table;
    void table.save(this.file).catch(() => undefined);
    return table;
  }

  private keepOther(table: ChangeTable): void {
    this.tables.set(table.commit, table);
    let paths = 0;
    for (const t of this.tables.values()) paths += t.times.size;
    for (const [commit, t] of this.tables) {
      if (paths <= MAX_OTHER_PATHS || this.tables.size === 1) break;
      this.tables.delete(commit);
      paths -= t.times.size;
    }
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
