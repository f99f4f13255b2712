import { UserError } from '../util/errors.js';
import { validateRole } from '../util/names.js';
import { treeFiles } from '../memory/files.js';
import { parseNote, setField } from '../memory/note.js';
import { NOTES_DIR, QUARANTINE_DIR, SKILLS_DIR } from '../memory/layout.js';
import { defaultTemplate } from '../home/template.js';
import { layoutToAdd, readmeOf, readmeParagraph, repositoryName } from '../home/adopt-layout.js';
import { restoredForReview } from '../merge/adopt-review.js';
import type { Adopted, HomeSummary, Retired } from '../api/types.js';
import type { Credentials } from '../api/credentials.js';
import type { LeaseService } from './leases.js';
import type { PrService } from './prs.js';
import type { HomeSet } from '../homes/home-set.js';
import type { Branches } from './branches.js';
import type { Homes } from './homes.js';

/**
 * The end of a Home's working life, all owner actions: archive (unmounted, kept) and unarchive, and retire
 * (the successor receives what the Home learned, for review). A Home with a run in flight is left alone.
 */
export class LifecycleService {
  constructor(
    private readonly homes: HomeSet,
    private readonly homeFlows: Homes,
    private readonly branches: Branches,
    private readonly leases: LeaseService,
    private readonly prs: PrService,
  ) {}

  private refuseWhileRunning(role: string, action: string): void {
    const runs = this.homes.runs.all().filter((r) => r.role === role);
    if (runs.length > 0) throw new UserError(`Home ${role} has run(s) in flight (${runs.map((r) => r.id).join(', ')}): wait for them before ${action}`, 409);
  }

  /** Every lease of the Home ends (its branches keep their work). */
  private async endLeases(role: string): Promise<void> {
    for (const branch of this.homes.branchNames(role)) await this.leases.revokeBranch(role, branch);
    await this.leases.apply(role);
  }

  /**
   * A Home from an existing git repository (`nas home adopt`): its default branch's history is main's, with one
   * commit by nasd on top that sets `.nas/` to the built-in template's (adopt-review.ts), so nothing of the
   * repository's own configuration is in force before review. The repository's own `.nas/` files and the
   * executables its `.nas/checks.yaml` names, with the Home's layout where the repository has nothing of its own
   * (adopt-layout.ts: AGENTS.md introducing the repository, CLAUDE.md, memory/, inbox/, outbox/, skills/, the
   * .gitignore's editor rules), are proposed as one commit on a branch off main; that PR waits for the owner (as
   * every metadata change does).
   */
  async adopt(role: string, source: string, owner: string, creds: Credentials): Promise<Adopted> {
    const { summary, branch, upstream } = await this.homeFlows.adoptHome(role, source, owner);
    const snap = await this.homes.snapshot(role);
    const store = snap.home.store;
    const mainTree = (await store.readCommit(snap.commit)).tree;
    const theirs = (await store.readCommit(upstream)).tree;
    const changes = await restoredForReview(store, theirs);
    const readme = await readmeOf(store, theirs);
    const template = defaultTemplate(role, owner, new Date(), { repository: repositoryName(source), readme: readme === null ? null : readmeParagraph(readme) });
    for (const [path, entry] of await layoutToAdd(store, theirs, template)) changes.set(path, entry);
    // What main holds as it is (a repository's .nas/ file equal to the template's) is no change.
    for (const [path, entry] of changes) {
      const now = await store.lookupPath(mainTree, path);
      if (now?.oid === entry.oid && now.mode === entry.mode) changes.delete(path);
    }
    const adopted = { ...summary, source, branch, proposed: [...changes.keys()] };
    if (changes.size === 0) return adopted;
    const commit = await store.writeCommit({
      tree: await store.editTree(mainTree, changes), parents: [snap.commit],
      message: `The repository's own .nas/ files and the Home's layout it lacks, for review (nas home adopt)\n\nNas-Principal: ${owner}\n`,
      author: { name: owner, email: `${owner}@agent-nas` },
    });
    const prBranch = `nas-adopt-${commit.slice(0, 12)}`;
    await this.branches.createBranch(role, prBranch, { at: commit, ttl: '7d' });
    const pr = await this.prs.propose(role, prBranch, { intent: `adopt ${source}: the repository's own .nas/ files (and what its checks run) and the Home's layout it lacks (AGENTS.md, memory/, inbox/, outbox/, skills/...), for review` }, creds);
    return { ...adopted, pr: pr.id, prState: pr.state };
  }

  async archive(role: string): Promise<HomeSummary> {
    this.homes.homeOf(role);
    this.refuseWhileRunning(role, 'archiving it');
    await this.endLeases(role);
    return this.homeFlows.archiveHome(role);
  }

  unarchive(role: string): Promise<HomeSummary> {
    return this.homeFlows.unarchiveHome(role);
  }

  /**
   * Retire a Home in favour of a successor: the predecessor's reviewed notes and its skills go to the successor
   * as one PR, quarantined (`memory/quarantine/from-<role>/`, labelled unreviewed, with their source), so
   * nothing the old Home learned is auto-loaded before the successor's owner reviews it. The retired Home stays
   * mounted and readable, its leases end and it takes no new branches; each Home records the other.
   */
  async retire(role: string, successor: string, creds: Credentials): Promise<Retired> {
    validateRole(successor);
    if (successor === role) throw new UserError('a Home cannot succeed itself: name another Home with --successor');
    const from = await this.homes.snapshot(role);
    this.homes.homeOf(successor);
    const state = this.homeFlows.listHomes().find((h) => h.role === role)?.state;
    if (state === 'retired') throw new UserError(`Home ${role} is retired already`, 409);
    this.refuseWhileRunning(role, 'retiring it');
    const store = from.home.store;
    const tree = (await store.readCommit(from.commit)).tree;
    const handover = `${QUARANTINE_DIR}from-${role}/`;
    const source = `${role}@${from.commit.slice(0, 12)}`;
    const files: { path: string; content: Buffer }[] = [];
    for (const f of await treeFiles(store, tree).list()) {
      if (f.path.startsWith(NOTES_DIR) && f.path.endsWith('.md')) {
        const text = (await store.readBlob(f.id)).toString();
        if (parseNote(text).trust !== 'reviewed') continue;
        const quarantined = setField(setField(text, 'trust', 'unreviewed'), 'source', `${source}:${f.path}`);
        files.push({ path: handover + f.path.slice(NOTES_DIR.length), content: Buffer.from(quarantined) });
      } else if (f.path.startsWith(SKILLS_DIR)) files.push({ path: `${handover}skills/${f.path.slice(SKILLS_DIR.length)}`, content: await store.readBlob(f.id) });
    }
    let pr: number | undefined;
    if (files.length > 0) {
      const branch = `from-${role}-${Date.now().toString(36)}`;
      await this.branches.createBranch(successor, branch, { ttl: '7d' });
      const view = this.homes.branchView(successor, branch);
      for (const f of files) await view.writeFile(f.path, f.content, null);
      await view.sync();
      pr = (await this.prs.propose(successor, branch, { intent: `successor of ${role}: its reviewed notes and skills, quarantined for review` }, creds)).id;
    }
    await this.endLeases(role);
    const at = new Date().toISOString();
    const by = from.config.role.owner ?? 'owner';
    await this.homes.setLifecycle(role, { retired: { successor, at, by, ...(pr !== undefined ? { pr } : {}) } }, `retire: successor ${successor}`);
    await this.homes.setLifecycle(successor, { predecessor: { role, at } }, `succeeds ${role}`);
    return { role, successor, handedOver: files.map((f) => f.path), ...(pr !== undefined ? { pr } : {}) };
  }
}
