import fs from 'node:fs/promises';
import { mkdirExact } from '../util/exact-mode.js';
import { exists } from '../util/exists.js';
import { Beneath } from '../util/beneath.js';
import yaml from 'js-yaml';
import { UserError } from '../util/errors.js';
import { validateBranch, validateRole } from '../util/names.js';
import { parseDuration } from '../util/duration.js';
import { MODE, RefConflict, Store, type Entry, type Identity } from '../store/store.js';
import { Trash } from '../trash/trash.js';
import { templateFiles } from './template.js';
import { PRE_RECEIVE } from './push-guard.js';
import { readHomeConfig, type HomeConfig } from '../config/home-config.js';
import { BRANCHES_REF, BRANCH_PREFIX, MAIN_REF, branchRef } from '../store/refs.js';

/** A branch's record, kept as plain text in the Store (refs/nas/branches: `<branch>.yaml`). */
export interface BranchRecord {
  name: string;
  from: string;
  base: string;
  created: string;
  ttl: string;
  expires: string;
  run?: string;
  /**
   * Set when nasd made the branch read-only (its TTL passed): the grace period counts from here, not from
   * `expires`, and starts again when the wall clock jumps forward, so a jump never expires and removes a branch
   * at once. Dropped when the owner extends the branch.
   */
  grace_from?: string;
  /**
   * Files an update left for a person to decide (merge/update.ts `unresolved`): the sides are main's version in
   * commit `main` and the branch's as it is. The branch cannot be proposed while any is listed.
   */
  unresolved?: UnresolvedConflict[];
  /**
   * Its work merged into main (an Agent PR): which PR, when, and the branch's head that merged. The branch is
   * removed once the Home's `merged_branch_grace` has passed (a run's at once), unless it took writes since:
   * then the mark is dropped and it is live again (workflows/finished-work.ts).
   */
  merged?: MergedMark;
}

export interface MergedMark {
  pr: number;
  at: string;
  head: string;
}

export interface UnresolvedConflict {
  path: string;
  /** The main commit the update merged. */
  main: string;
  why: string;
}


/**
 * A Home: one bare git repository (`<state>/homes/<role>.git`) holding the Home's history, its branches'
 * records, its recycle area and, under `nas/branches/<branch>/`, each branch's upper directory.
 */
export class Home {
  readonly trash: Trash;

  private constructor(readonly role: string, readonly dir: string, readonly store: Store, readonly identity: Identity) {
    this.trash = new Trash(store, identity);
  }

  static dirFor(stateDir: string, role: string): string {
    return `${stateDir}/homes/${validateRole(role)}.git`;
  }

  static async list(stateDir: string): Promise<string[]> {
    try {
      return (await fs.readdir(`${stateDir}/homes`)).filter((n) => n.endsWith('.git')).map((n) => n.slice(0, -4)).sort();
    } catch {
      return [];
    }
  }

  static async create(stateDir: string, role: string, opts: { template?: string; templatesDir?: string; owner: string; identity: Identity }): Promise<Home> {
    const dir = Home.dirFor(stateDir, role);
    const template = opts.template ?? 'default';
    if (await exists(dir)) throw new UserError(`Home "${role}" already exists`, 409);
    // Read (and checked) before anything is made: a bad template leaves nothing behind.
    const files = await templateFiles(template, opts.templatesDir ?? '/etc/agent-nas/templates', role, opts.owner, new Date());
    await fs.mkdir(`${stateDir}/homes`, { recursive: true, mode: 0o700 });
    try {
      await fs.mkdir(dir, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new UserError(`Home "${role}" already exists`, 409);
      throw e;
    }
    const store = await Store.init(dir);
    await store.installHook('pre-receive', PRE_RECEIVE);
    const changes = new Map<string, Entry>();
    for (const f of files) {
      const mode = f.kind === 'symlink' ? MODE.link : f.kind === 'exec' ? MODE.exec : MODE.file;
      changes.set(f.path, { oid: await store.writeBlob(f.content), mode });
    }
    await store.commitChanges(MAIN_REF, { head: null, changes, message: `nas: create Home ${role} from template ${template}\n`, author: opts.identity });
    await store.setHead(MAIN_REF);
    await fs.mkdir(`${dir}/nas/branches`, { recursive: true });
    return new Home(role, dir, store, opts.identity);
  }

  static async open(stateDir: string, role: string, identity: Identity): Promise<Home> {
    const dir = Home.dirFor(stateDir, role);
    const store = await Store.open(dir);
    if (!(await store.readRef(MAIN_REF))) throw new Error(`${dir} has no main branch: not a Home`);
    await store.installHook('pre-receive', PRE_RECEIVE);
    return new Home(role, dir, store, identity);
  }

  async mainHead(): Promise<string> {
    const head = await this.store.readRef(MAIN_REF);
    if (!head) throw new Error(`Home ${this.role} lost its main ref`);
    return head;
  }

  /**
   * The Home's metadata as of a commit. Protection fails closed: when `policy.yaml` or `limits.yaml` cannot
   * be read whole (malformed, a bad key, missing), the last version of that file in the commit's history that
   * could be is enforced instead of the defaults, and the problems say so.
   */
  async config(commit: string): Promise<HomeConfig> {
    const config = await this.configAt(commit);
    for (const key of ['policy', 'limits'] as const) {
      const file = `.nas/${key}.yaml`;
      if (!config.problems.some((p) => p.startsWith(`${file}:`))) continue;
      const last = await this.lastValid(commit, file);
      if (!last) continue;
      Object.assign(config, { [key]: last.config[key] });
      config.problems.push(`${file}: the last valid version (commit ${last.commit.slice(0, 12)}) stays in force until a valid one is merged`);
    }
    return config;
  }

  private async configAt(commit: string): Promise<HomeConfig> {
    const tree = (await this.store.readCommit(commit)).tree;
    return readHomeConfig(async (path) => {
      const entry = await this.store.lookupPath(tree, path);
      return !entry || entry.mode === MODE.tree ? null : (await this.store.readBlob(entry.oid)).toString();
    });
  }

  /** lastValid's answers: commits never change, so neither do they. */
  private readonly lastValidCache = new Map<string, Promise<{ commit: string; config: HomeConfig } | null>>();

  /** The newest ancestor (first parents, at most 200 back) where `file` reads without a problem. */
  private lastValid(commit: string, file: string): Promise<{ commit: string; config: HomeConfig } | null> {
    const key = `${commit}:${file}`;
    let found = this.lastValidCache.get(key);
    if (!found) this.lastValidCache.set(key, (found = this.findLastValid(commit, file)));
    return found;
  }

  private async findLastValid(commit: string, file: string): Promise<{ commit: string; config: HomeConfig } | null> {
    let c: string | undefined = (await this.store.readCommit(commit)).parents[0];
    for (let i = 0; c && i < 200; i++) {
      const config = await this.configAt(c);
      if (!config.problems.some((p) => p.startsWith(`${file}:`))) return { commit: c, config };
      c = (await this.store.readCommit(c)).parents[0];
    }
    return null;
  }

  branchDir(branch: string): string {
    return `${this.dir}/nas/branches/${validateBranch(branch)}`;
  }

  async branches(): Promise<BranchRecord[]> {
    const refs = await this.store.listRefs(BRANCH_PREFIX);
    const records = await this.branchRecords();
    const out: BranchRecord[] = [];
    for (const ref of refs.keys()) {
      const name = ref.slice(BRANCH_PREFIX.length);
      if (name === 'main') continue;
      out.push(records.get(name) ?? { name, from: '?', base: '?', created: '?', ttl: '?', expires: '?' });
    }
    return out;
  }

  private async branchRecords(): Promise<Map<string, BranchRecord>> {
    const head = await this.store.readRef(BRANCHES_REF);
    const out = new Map<string, BranchRecord>();
    if (!head) return out;
    const tree = await this.store.readTree((await this.store.readCommit(head)).tree);
    for (const [file, entry] of tree) {
      const rec = yaml.load((await this.store.readBlob(entry.oid)).toString(), { schema: yaml.CORE_SCHEMA }) as BranchRecord;
      out.set(file.replace(/\.yaml$/, ''), rec);
    }
    return out;
  }

  /**
   * Create a branch in O(1): a ref at the source's head, a plain-text record, an empty upper directory.
   * Nothing walks the Home's tree, so the cost is the same for 100 files and for 100,000. `at`: the commit to
   * fork at (attempts started together share one), else `from`'s head now.
   */
  async createBranch(name: string, opts: { from?: string; at?: string; ttl?: string; run?: string; defaultTtl: string }): Promise<BranchRecord> {
    validateBranch(name);
    const from = opts.from ?? 'main';
    if (from !== 'main') validateBranch(from);
    const ttl = opts.ttl ?? opts.defaultTtl;
    const ttlSeconds = parseDuration(ttl);
    const base = opts.at ?? (await this.store.readRef(branchRef(from)));
    if (!base) throw new UserError(`cannot branch from "${from}": Home ${this.role} has no such branch`, 404);
    const now = new Date();
    const record: BranchRecord = {
      name, from, base, created: now.toISOString(), ttl,
      expires: new Date(now.getTime() + ttlSeconds * 1000).toISOString(),
      ...(opts.run ? { run: opts.run } : {}),
    };
    try {
      await this.store.updateRef(branchRef(name), base, null, `nas: branch ${name} from ${from}`);
    } catch (e) {
      if (e instanceof RefConflict) throw new UserError(`branch "${name}" already exists in Home ${this.role}`, 409);
      throw e;
    }
    // What an earlier branch of this name left (a removal that failed) is not taken over: it goes first.
    await new Beneath(`${this.dir}/nas/branches`).removeTree(name);
    // The view's root is upper/: 0755 as main's shows (nasd's umask would leave it its own); the rest stays nasd's.
    await mkdirExact(`${this.branchDir(name)}/upper`, 0o755, 0o700);
    await this.writeBranchRecord(record);
    return record;
  }

  /** Remove a branch: its ref, its record and its directory (the caller has filed its work in the recycle area). */
  async removeBranch(name: string): Promise<void> {
    validateBranch(name);
    const head = await this.store.readRef(branchRef(name));
    if (head) await this.store.deleteRef(branchRef(name), head);
    await this.store.commitToRef(BRANCHES_REF, async (tree) => (tree && (await this.store.lookupPath(tree, `${name}.yaml`)) ? new Map([[`${name}.yaml`, null]]) : null),
      `nas: discard branch ${name}\n`, this.identity);
    // Its scratch (workspace/) was the branch's users' own to change: removed without following what they left.
    await new Beneath(`${this.dir}/nas/branches`).removeTree(name);
  }

  /** Write (or rewrite) a branch's record. */
  async writeBranchRecord(record: BranchRecord): Promise<void> {
    const blob = await this.store.writeBlob(`# Branch record, written by nas branch create.\n${yaml.dump(record)}`);
    const changes = new Map([[`${record.name}.yaml`, { oid: blob, mode: MODE.file }]]);
    await this.store.commitToRef(BRANCHES_REF, async () => changes, `nas: record branch ${record.name}\n`, this.identity);
  }
}
