import { MAIN_REF } from '../home/home.js';
import { UserError } from '../util/errors.js';
import { validateBranch } from '../util/names.js';
import { treeFiles } from '../memory/files.js';
import { isNote } from '../memory/layout.js';
import { knownChecks, parseCheckDefinitions, runChecks } from '../merge/checks.js';
import { mergeIntoMain, type MergeOutcome } from '../merge/merge.js';
import { PrStateConflict, type PrState, type PullRequest } from '../merge/pr-store.js';
import { decide } from '../policy/merge-policy.js';
import { requireOwner, type Credentials } from './auth.js';
import type { LeaseService } from './lease-service.js';
import { branchMemory } from './memory-service.js';
import type { Registry } from './registry.js';

/** Agent PRs through the control API: propose, list, show, approve, reject, stats. */

export class PrService {
  constructor(private readonly reg: Registry, private readonly leases: LeaseService, private readonly stateDir: string) {}

  /**
   * Commit what is pending, diff against main, run the checks main defines, and apply main's policy: merge
   * by itself, wait for the owner, or fail. Refused (nothing created) when the branch changed nothing.
   */
  async propose(role: string, branch: string, opts: { intent?: string; checks?: string[] }, creds: Credentials): Promise<PullRequest> {
    validateBranch(branch);
    const who = await this.leases.authorize(role, branch, 'propose:main', creds, `propose ${role}/${branch}`);
    const intent = (opts.intent ?? '').replace(/\s+/g, ' ').trim();
    if (!intent) throw new UserError('say what the change is for: --intent "..." (it goes into the merge commit)');
    if (/[\x00-\x1f\x7f]/.test(intent)) throw new UserError('--intent must be plain text: no control characters');
    if (intent.length > 500) throw new UserError('--intent is over 500 characters: one sentence is enough');
    const snap = await this.reg.snapshot(role, branch);
    const store = snap.home.store;
    const base = await store.mergeBase(snap.commit, snap.mainHead);
    if (!base) throw new UserError(`${snap.name} shares no history with main`, 409);
    const [baseTree, headTree, mainTree] = await Promise.all([base, snap.commit, snap.mainHead].map(async (c) => (await store.readCommit(c)).tree));
    // Everything that judges the PR comes from main, never from the branch.
    const policy = snap.config.policy;
    const checksEntry = await store.lookupPath(mainTree, '.nas/checks.yaml');
    const defs = parseCheckDefinitions(checksEntry ? (await store.readBlob(checksEntry.oid)).toString() : null);
    const known = knownChecks(defs.checks);
    const requested = opts.checks ?? [];
    const unknown = requested.filter((c) => !known.includes(c));
    if (unknown.length > 0) throw new UserError(`unknown check(s) ${unknown.join(', ')}; main defines: ${known.join(', ')}`);
    const names = [...new Set([...policy.merge.required_checks.filter((c) => known.includes(c)), ...requested])];
    // A required check main does not define is a policy problem: nothing merges by itself until it is fixed.
    const missing = policy.merge.required_checks.filter((c) => !known.includes(c));
    const policyProblems = [
      ...snap.config.problems.filter((p) => p.startsWith('.nas/policy.yaml')),
      ...(missing.length > 0 ? [`.nas/policy.yaml: merge.required_checks names unknown check(s) ${missing.join(', ')}`] : []),
    ];
    const changes = await store.changes(baseTree, headTree);
    if (changes.length === 0) throw new UserError(`nothing to propose: ${snap.name} has no changes against main (no PR was created)`, 409);

    const memory = await branchMemory(store, treeFiles(store, headTree), snap.commit, snap.mainHead);
    const checks = await runChecks({ store, head: headTree, base: baseTree, main: mainTree, changes, memory, limits: snap.config.limits }, names, defs.checks, defs.problems);

    const notes = changes.filter((c) => c.after && isNote(c.path)).map((c) => c.path);
    const trustOf = (p: string) => memory.docs.get(p)?.note?.trust;
    const claims = changes.filter((c) => c.after && c.path.startsWith('memory/') && trustOf(c.path) === 'reviewed').map((c) => c.path);
    const reads = snap.view!.reads;
    const decision = decide({
      auto: policy.merge.auto,
      policyProblems,
      checks,
      deleted: changes.filter((c) => c.status === 'deleted').map((c) => c.path),
      metadata: changes.filter((c) => c.path.startsWith('.nas/')).map((c) => c.path),
      reviewedClaims: claims,
      inboxReads: reads.paths().filter((p) => p.startsWith('inbox/')),
    });
    // Checks can take a while: the lease must still hold when the PR is filed (and merged).
    await this.leases.authorize(role, branch, 'propose:main', creds, `propose ${role}/${branch}`);
    const now = new Date().toISOString();
    const count = (s: string) => changes.filter((c) => c.status === s).length;
    const pr = await snap.home.prs.create({
      home: role, branch, target: 'main', state: decision.action === 'fail' ? 'failed' : decision.action === 'merge' ? 'merging' : 'waiting', intent,
      created: now, updated: now, head: snap.commit, base, target_head: snap.mainHead,
      provenance: {
        principal: who.principal, ...(who.lease ? { lease: who.lease.id } : {}),
        ...(snap.view!.run ? { run: snap.view!.run } : {}), reads: reads.paths().length, reads_digest: reads.digest(),
      },
      changes: { added: count('added'), modified: count('modified'), deleted: count('deleted'), paths: changes.map((c) => `${c.status[0].toUpperCase()} ${c.path}`) },
      checks: checks.map((c) => ({ name: c.name, ok: c.ok, ms: c.ms, output: c.output })),
      trust: { notes_changed: notes, unreviewed: notes.filter((p) => trustOf(p) !== 'reviewed'), reviewed_claims: claims },
      reasons: decision.action === 'merge' ? [] : decision.reasons,
    }, reads.text());
    return decision.action === 'merge' ? this.merge(role, pr, 'policy') : pr;
  }

  async list(role: string): Promise<object[]> {
    return (await this.reg.homeOf(role).prs.list()).map((p) => ({
      id: p.id, branch: p.branch, state: p.state, intent: p.intent, principal: p.provenance.principal,
      checks: p.checks.map((c) => `${c.name}:${c.ok ? 'pass' : 'FAIL'}`).join(' '), created: p.created,
    }));
  }

  async show(role: string, id: number): Promise<object> {
    const home = this.reg.homeOf(role);
    const pr = await this.need(role, id);
    const [baseTree, headTree] = await Promise.all([pr.base, pr.head].map(async (c) => (await home.store.readCommit(c)).tree));
    return { ...pr, diff: await home.store.diffText(baseTree, headTree), reads: await home.prs.reads(id) };
  }

  async approve(role: string, id: number, creds: Credentials): Promise<PullRequest> {
    requireOwner(creds, 'approving a PR', this.stateDir);
    await this.need(role, id);
    const owner = (await this.reg.snapshot(role)).config.role.owner ?? 'owner';
    const pr = await this.decide(role, id, ['waiting'], (p) => {
      p.state = 'merging';
      p.decision = { by: owner, at: new Date().toISOString(), action: 'approve' };
    }, 'only a waiting PR can be approved');
    return this.merge(role, pr, owner);
  }

  async reject(role: string, id: number, why: string | undefined, creds: Credentials): Promise<PullRequest> {
    requireOwner(creds, 'rejecting a PR', this.stateDir);
    if (!why?.trim()) throw new UserError('say why: --why "..." (the run reads it)');
    await this.need(role, id);
    const owner = (await this.reg.snapshot(role)).config.role.owner ?? 'owner';
    return this.decide(role, id, ['waiting', 'conflict', 'failed'], (p) => {
      p.state = 'rejected';
      p.decision = { by: owner, at: new Date().toISOString(), action: 'reject', why: why.trim() };
    }, 'it can no longer be rejected');
  }

  /** One decision at a time: the PR must still be in an expected state when the decision is written. */
  private async decide(role: string, id: number, from: PrState[], change: (pr: PullRequest) => void, refusal: string): Promise<PullRequest> {
    try {
      return await this.reg.homeOf(role).prs.transition(id, from, change);
    } catch (err) {
      if (err instanceof PrStateConflict) {
        throw new UserError(`${err.message}: ${refusal}${/failed|conflict/.test(err.message) ? ' (fix the branch and propose again)' : ''}`, 409);
      }
      throw err;
    }
  }

  async stats(role: string): Promise<object> {
    const prs = await this.reg.homeOf(role).prs.list();
    const n = (f: (p: PullRequest) => boolean) => prs.filter(f).length;
    const auto = n((p) => p.state === 'merged' && p.merged?.by === 'policy');
    const approved = n((p) => p.decision?.action === 'approve');
    const rejected = n((p) => p.state === 'rejected');
    const decided = approved + rejected;
    return {
      total: prs.length, merged_by_policy: auto, approved, rejected,
      waiting: n((p) => p.state === 'waiting'), failed: n((p) => p.state === 'failed'), conflict: n((p) => p.state === 'conflict'),
      approval_rate: decided === 0 ? null : Math.round((approved / decided) * 1000) / 10,
      auto_merge_rate: prs.length === 0 ? null : Math.round((auto / prs.length) * 1000) / 10,
    };
  }

  private async need(role: string, id: number): Promise<PullRequest> {
    if (!Number.isInteger(id) || id < 1) throw new UserError('a PR id is a whole number (see nas pr list)');
    const pr = await this.reg.homeOf(role).prs.get(id);
    if (!pr) throw new UserError(`Home ${role} has no PR ${id}; see nas pr list ${role}`, 404);
    return pr;
  }

  /** Merge a PR's head into main (by policy or by the owner) and record the outcome. */
  private async merge(role: string, pr: PullRequest, by: string): Promise<PullRequest> {
    const home = this.reg.homeOf(role);
    const trailers = [
      `Nas-PR: ${pr.id}`, `Nas-Branch: ${pr.branch}`, `Nas-Run: ${pr.provenance.run ?? '-'}`, `Nas-Lease: ${pr.provenance.lease ?? '-'}`,
      `Nas-Principal: ${pr.provenance.principal}`, `Nas-Intent: ${pr.intent}`,
      `Nas-Checks: ${pr.checks.map((c) => `${c.name}=${c.ok ? 'pass' : 'fail'}`).join(', ') || '-'}`,
      `Nas-Reads-Digest: ${pr.provenance.reads_digest}`, `Nas-Merged-By: ${by}`,
    ];
    let outcome: MergeOutcome;
    try {
      outcome = await mergeIntoMain(home.store, home.trash, {
        head: pr.head, branch: pr.branch, run: pr.provenance.run,
        message: `Merge PR ${pr.id} from ${pr.branch}: ${pr.intent}\n\n${trailers.join('\n')}\n`,
        author: { name: pr.provenance.principal, email: `${pr.provenance.principal}@agent-nas` },
      });
    } catch (err) {
      // Back to the owner rather than stuck "merging": approving again merges, or finds main up to date.
      pr.state = 'waiting';
      pr.reasons = [`the merge did not complete (${(err as Error).message}); approve it again`];
      await home.prs.update(pr);
      throw err;
    }
    if (outcome.kind === 'merged') {
      pr.state = 'merged';
      pr.merged = { commit: outcome.commit, at: new Date().toISOString(), by };
      delete pr.conflicts;
    } else if (outcome.kind === 'conflict') {
      pr.state = 'conflict';
      pr.conflicts = outcome.conflicts;
      pr.reasons = [`conflicts with main in ${outcome.conflicts.map((c) => c.path).join(', ')}`];
    } else {
      pr.state = 'merged';
      pr.merged = { commit: (await home.store.readRef(MAIN_REF))!, at: new Date().toISOString(), by };
    }
    await home.prs.update(pr);
    await this.reg.refreshMains();
    return pr;
  }
}
