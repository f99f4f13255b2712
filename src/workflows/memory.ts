import { MODE, RefConflict, type Entry } from '../store/store.js';
import { UserError } from '../util/errors.js';
import { validateRelPath, validateRole } from '../util/names.js';
import { checkMemory, type Finding, type Rule } from '../memory/check.js';
import { briefing, BriefingTooSmall, contextLists, measure } from '../memory/context.js';
import { filterFiles, treeFiles, withChanges, type FileSet } from '../memory/files.js';
import { START_SET } from '../memory/layout.js';
import { loadMemory, markedIndexes, regenerate, type Memory } from '../memory/model.js';
import { branchMemory } from '../memory/branch-memory.js';
import { planReview, ReviewRefused, type ReviewPlan } from '../memory/review.js';
import { importNote } from '../memory/import.js';
import { sharedCopy, sharedIndex, sharedProblems, ShareRefused, type SharedContext, type ShareResult } from '../memory/shared.js';
import { mergeIntoMain, type MergeOutcome } from '../merge/merge.js';
import type { HomeSet, Snapshot } from '../homes/home-set.js';
import type { Readers } from './readers.js';
import type { Credentials } from '../api/credentials.js';
import type { Branches } from './branches.js';
import type { PrService } from './prs.js';
import type { FileUpload } from '../api/schema.js';
import type {
  BriefingReport, ContextReport, ImportReport, IndexReport, MeasureReport, MemoryCheckReport, ReviewResult,
} from '../api/types.js';
import { meter } from '../metrics/meter.js';

/** The memory commands of the control API: read a view's committed state, run src/memory on it, write back. */

const INDEX_RULES = new Set<Rule>([
  'index-markers', 'index-stale', 'index-size', 'topic-description', 'topic-size', 'topic-depth', 'topic-updated',
  'description-length', 'front-matter', 'binary', 'too-large',
]);

export class MemoryService {
  constructor(
    private readonly homes: HomeSet,
    private readonly readers: Readers,
    private readonly branches: Branches,
    private readonly prs: PrService,
  ) {}

  private async files(role: string, branch?: string): Promise<{ snap: Snapshot; files: FileSet; tree: string }> {
    const snap = await this.homes.snapshot(role, branch);
    const tree = (await snap.home.store.readCommit(snap.commit)).tree;
    return { snap, files: treeFiles(snap.home.store, tree), tree };
  }

  private load(snap: Snapshot, files: FileSet): Promise<Memory> {
    return snap.view ? branchMemory(snap.home.store, files, snap.commit, snap.mainHead) : loadMemory(files);
  }

  /**
   * Every memory rule; on a branch, trust labels are compared with the commit the branch forked from. A `shared:`
   * entry of `.nas/role.yaml` that names no Home here is an error too (the context leaves it out and goes on).
   */
  async check(role: string, branch?: string): Promise<MemoryCheckReport> {
    const { snap, files } = await this.files(role, branch);
    const report = checkMemory(await this.load(snap, files), snap.config.limits);
    for (const message of sharedProblems(role, snap.config.role.shared ?? [], (home) => this.unreadable(home))) {
      report.findings.unshift({ level: 'error', rule: 'shared-scope', path: '.nas/role.yaml', message });
      report.errors++;
      report.ok = false;
    }
    return { view: snap.name, commit: snap.commit, ...report };
  }

  /** Why a shared Home's main cannot be read here (no such Home, archived), or null. */
  private unreadable(home: string): string | null {
    try {
      this.homes.mounted(home);
      return null;
    } catch (err) {
      if (err instanceof UserError) return err.message;
      throw err;
    }
  }

  /** Regenerate every index block in a branch (text outside the markers untouched), or with check only report. */
  async index(role: string, branch: string | undefined, checkOnly: boolean): Promise<IndexReport> {
    if (checkOnly) {
      const report = await this.check(role, branch);
      const findings = report.findings.filter((f) => INDEX_RULES.has(f.rule));
      const errors = findings.filter((f) => f.level === 'error').length;
      return { view: report.view, commit: report.commit, ok: errors === 0, errors, warnings: findings.length - errors, findings, indexes: report.indexes };
    }
    if (!branch || branch === 'main') {
      throw new UserError(`main is protected: regenerate the index in a branch (nas memory index ${role}@<branch>) and merge it, or pass --check`);
    }
    const { snap, files } = await this.files(role, branch);
    const memory = await this.load(snap, files);
    const problems = markedIndexes(memory).flatMap((i) => i.problems.map((p) => ({ path: i.path, line: p.line, message: p.message })));
    const written: string[] = [];
    for (const { path, text } of regenerate(memory)) {
      await snap.view!.writeFile(path, Buffer.from(text), memory.docs.get(path)!.file.id);
      written.push(path);
    }
    return { view: snap.name, written, indexes: markedIndexes(memory).map((i) => i.path), problems, ok: problems.length === 0, head: snap.view!.head };
  }

  /** `creds`: who asks; a shared Home's notes are filtered to what it could read through the mount (their descriptions are content). */
  async context(role: string, branch?: string, creds?: Credentials): Promise<ContextReport> {
    const { snap, files } = await this.files(role, branch);
    const lists = contextLists(await this.load(snap, files));
    const shared: SharedContext[] = [];
    for (const home of snap.config.role.shared ?? []) {
      if (home === role) continue;
      const why = this.unreadable(home);
      if (why) {
        shared.push({ home, topics: [], problem: why });
        continue;
      }
      // Main only: what the shared Home's gate let in. A reader never sees the shared Home's branches.
      const other = await this.files(home);
      const mayRead = creds ? this.readers.mayRead(await this.readers.of(home, creds), other.snap.home.store, this.homes.viewShare(home)) : undefined;
      const readable = mayRead ? filterFiles(other.files, (p) => mayRead(other.tree, p)) : other.files;
      shared.push({ home, root: other.snap.path, ...sharedIndex(await loadMemory(readable)) });
    }
    return { view: snap.name, root: snap.path, ...lists, shared };
  }

  /**
   * Propose a reviewed note of `role`'s main to a shared Home (`nas memory share`): a branch off that Home's main
   * with the copy in its quarantine, proposed there like any change, so it passes that Home's gate; the shared
   * Home's owner then reviews it into what its readers see. Nothing is written to the shared Home's main here.
   */
  async share(role: string, notePath: string, to: string, creds: Credentials): Promise<ShareResult> {
    validateRole(to);
    if (to === role) throw new UserError(`--to names ${role} itself: share a note with another Home`);
    const path = validateRelPath(notePath);
    const from = await this.files(role);
    const target = await this.files(to);
    let copy: { path: string; text: string };
    try {
      copy = sharedCopy(await loadMemory(from.files), { role, commit: from.snap.commit }, path);
    } catch (err) {
      if (err instanceof ShareRefused) throw new UserError(`${err.message} (nothing was shared)`, 409);
      throw err;
    }
    const store = target.snap.home.store;
    const tree = await store.editTree(target.tree, new Map([[copy.path, { oid: await store.writeBlob(copy.text), mode: MODE.file }]]));
    if (tree === target.tree) throw new UserError(`${to}'s main has this copy already at ${copy.path}; nothing was shared`, 409);
    const owner = target.snap.config.role.owner ?? 'owner';
    const message = `Share memory note ${path} of ${role}\n\nNas-Principal: ${owner}\nNas-Shared-From: ${role}@${from.snap.commit}:${path}\n`;
    const commit = await store.writeCommit({ tree, parents: [target.snap.commit], message, author: { name: owner, email: `${owner}@agent-nas` } });
    const branch = `nas-share-${role}-${commit.slice(0, 12)}`;
    if (this.homes.branchNames(to).includes(branch)) throw new UserError(`the same copy waits in ${to}/${branch} already (its PR decides it); nothing was shared`, 409);
    await this.branches.createBranch(to, branch, { at: commit, ttl: '7d' });
    let pr;
    try {
      pr = await this.prs.propose(to, branch, { intent: `share ${role}'s reviewed note ${path} with ${to} (unreviewed here until ${to}'s owner reviews it)` }, creds);
    } catch (err) {
      // A proposal refused leaves nothing behind.
      await this.branches.discardBranch(to, branch, `the share of ${path} was not proposed`).catch(() => undefined);
      throw err;
    }
    // The control API lets go of the views of the Home the route names (role); the change is in the shared Home's.
    await this.homes.viewsChanged(to);
    return { from: role, note: path, to, path: copy.path, branch, pr: pr.id, prState: pr.state };
  }

  /**
   * The boot view. It carries file content: for a caller (`creds`; a run's briefing, made at its start, as the
   * run), only what it could read through the mount goes in, and that counts as read by its branch.
   */
  async briefing(role: string, branch: string | undefined, maxTokens: number, creds?: Credentials): Promise<BriefingReport> {
    if (!Number.isInteger(maxTokens) || maxTokens < 100) throw new UserError('--max-tokens must be a whole number of at least 100');
    const { snap, files, tree } = await this.files(role, branch);
    const who = creds ? await this.readers.of(role, creds) : { reader: null };
    const mayRead = this.readers.mayRead(who, snap.home.store, this.homes.viewShare(role, branch));
    const shown = mayRead ? filterFiles(files, (p) => mayRead(tree, p)) : files;
    try {
      const report = { view: snap.name, ...briefing(await this.load(snap, shown), snap.name, maxTokens) };
      const start = new Set(START_SET.map((s) => s.path));
      await this.readers.record(who, (await shown.list()).filter((f) => start.has(f.path)).map((f) => ({ path: f.path, oid: f.id })));
      return report;
    } catch (err) {
      if (err instanceof BriefingTooSmall) throw new UserError(err.message);
      throw err;
    }
  }

  async measure(role: string, branch: string | undefined, tasks: string[]): Promise<MeasureReport> {
    const { snap, files } = await this.files(role, branch);
    const memory = await this.load(snap, files);
    try {
      return { view: snap.name, ...measure(memory, tasks.map((t) => validateRelPath(t))) };
    } catch (err) {
      throw new UserError((err as Error).message);
    }
  }

  /**
   * Import notes written for another framework into a branch's quarantine, unreviewed. A file whose name is
   * taken in the branch is refused, not overwritten; the others are imported.
   */
  async import(role: string, branch: string | undefined, items: FileUpload[]): Promise<ImportReport> {
    if (!branch || branch === 'main') throw new UserError(`main is protected: import into a branch (nas memory import ${role}@<branch> ...)`);
    if (items.length === 0) throw new UserError('name at least one file to import');
    const { snap } = await this.files(role, branch);
    const view = snap.view!;
    const today = new Date().toISOString().slice(0, 10);
    const imported: { from: string; to: string }[] = [];
    const refused: { from: string; reason: string }[] = [];
    const taken = new Set<string>();
    for (const item of items) {
      try {
        const note = importNote(item.name, Buffer.from(item.content, 'base64'), today);
        if (taken.has(note.path) || (await view.exists(note.path))) throw new Error(`${note.path} exists in ${view.name}; rename the file and import it again`);
        taken.add(note.path);
        await view.writeFile(note.path, Buffer.from(note.text), null);
        imported.push({ from: item.name, to: note.path });
      } catch (err) {
        refused.push({ from: item.name, reason: (err as Error).message });
      }
    }
    return { view: view.name, imported, refused, ok: refused.length === 0, head: view.head };
  }

  /**
   * The owner's review, merged into main as any change is (mergeIntoMain): the note labelled reviewed (moved out
   * of quarantine), and the indexes regenerated in the same commit so main stays consistent. Refused when
   * MEMORY.md would go over its token cap: nothing is ever truncated.
   */
  async review(role: string, notePath: string, description: string | undefined): Promise<ReviewResult> {
    const { snap, files, tree: mainTree } = await this.files(role);
    const store = snap.home.store;
    const path = validateRelPath(notePath);
    let plan: ReviewPlan;
    try {
      plan = planReview(await loadMemory(files), path, description);
    } catch (err) {
      if (err instanceof ReviewRefused) throw new UserError(`${err.message} (nothing was changed)`, 409);
      throw err;
    }
    const { to } = plan;
    const changes = new Map<string, Buffer | null>();
    if (plan.from !== to) changes.set(plan.from, null);
    changes.set(to, Buffer.from(plan.text));
    for (const { path: p, text } of regenerate(await loadMemory(withChanges(files, changes)))) changes.set(p, Buffer.from(text));
    // Main must not get worse: any error the review would add (a budget, a broken index) refuses it.
    const key = (f: Finding) => `${f.rule}\0${f.path}\0${f.message}`;
    const before = new Set(checkMemory(await loadMemory(files), snap.config.limits).findings.map(key));
    const added = checkMemory(await loadMemory(withChanges(files, changes)), snap.config.limits).findings
      .filter((f) => f.level === 'error' && !before.has(key(f)));
    if (added.length > 0) {
      throw new UserError(`reviewing ${path} would break a check: ${added.map((f) => `${f.path}: ${f.message}`).join('; ')}. Nothing was changed`, 409);
    }

    const entries = new Map<string, Entry | null>();
    for (const [p, content] of changes) entries.set(p, content === null ? null : { oid: await store.writeBlob(content), mode: MODE.file });
    const tree = await store.editTree(mainTree, entries);
    if (tree === mainTree) throw new UserError(`${path} is reviewed already; nothing was changed`, 409);
    const owner = snap.config.role.owner ?? 'owner';
    const author = { name: owner, email: `${owner}@agent-nas` };
    const trailers = `Nas-Review: ${path}${to !== path ? ` -> ${to}` : ''}\nNas-Reviewer: ${owner}\n`;
    // Main changes only by merge: the review is a one-commit branch off main, merged with the owner as approver.
    const reviewed = await store.writeCommit({ tree, parents: [snap.commit], message: `Review memory note ${to}\n\n${trailers}`, author });
    let outcome: MergeOutcome;
    const started = performance.now();
    try {
      outcome = await mergeIntoMain(store, snap.home.trash, {
        head: reviewed, author,
        message: `Merge the review of memory note ${to}\n\n${trailers}Nas-Principal: ${owner}\nNas-Intent: review memory note ${to}\nNas-Merged-By: ${owner}\n`,
        // Checked above against this main only (budgets, indexes): if main moved, the owner runs it again.
        onto: snap.commit,
        // The quarantined note lives on under notes/: not a deletion for the recycle area.
        recycle: false,
      });
    } catch (err) {
      meter.merge('owner', 'error', (performance.now() - started) / 1000);
      if (err instanceof RefConflict) throw new UserError('main moved while the review was prepared; nothing was changed. Run it again', 409);
      throw err;
    }
    meter.merge('owner', outcome.kind === 'merged' ? 'merged' : outcome.kind === 'conflict' ? 'conflict' : 'up_to_date', (performance.now() - started) / 1000);
    // A branch off main itself merges as it is: it can neither conflict nor be merged already.
    if (outcome.kind !== 'merged') throw new Error(`the review of ${path} did not merge (${outcome.kind})`);
    await this.homes.refreshMains();
    return { reviewed: path, to, commit: outcome.commit, regenerated: [...changes.keys()].filter((p) => p !== path && p !== to) };
  }
}
