import { validateBranch, validateRelPath } from '../util/names.js';
import { UserError } from '../util/errors.js';
import { approvePr, cleanIntent, findPr, judgeProposal, mergePr, prStats, prsOf, rejectPr, type PrHome } from '../merge/propose.js';
import { SUPERSEDABLE, type PrState, type PullRequest } from '../merge/pr-store.js';
import { markMerged } from './finished-work.js';
import type { PrStats } from '../merge/propose.js';
import type { Logger } from 'pino';
import type { Decision, PrDetail, PrFile, PrFileContent, PrSummary } from '../api/types.js';
import { MODE } from '../store/store.js';
import { isMetaPath, META_ROOT } from '../store/file-meta.js';
import { MAIN_REF } from '../store/refs.js';
import { mapLimit } from '../util/concurrency.js';
import type { Credentials } from '../api/credentials.js';
import type { LeaseService } from './leases.js';
import type { HomeSet } from '../homes/home-set.js';
import type { Readers } from './readers.js';
import type { CheckDirs } from '../merge/check-sandbox.js';
import { octal, shownDiff } from '../merge/shown-diff.js';
import { runFailed } from '../merge/merge-policy.js';
import type { Cluster } from '../cluster/cluster.js';
import type { Decision as ClusterDecision, Filer } from '../cluster/writer.js';
import { readsOf, type Proposal, type ProposalResult } from '../cluster/proposal.js';
import { RunStore } from '../run/run-store.js';

/** In a cluster, how the Home's merge writer answered: which host, after how long, when it published main. */
export interface ClusterAnswer {
  writer: string;
  waited_ms: number;
  published_at: string;
}

/** A run's PR: how its command ended, and whether that was a failure (a mark in every list). */
const exitOf = (p: PullRequest): { exit?: string; run_failed?: boolean } =>
  p.provenance.exit !== undefined && p.provenance.exit !== '' ? { exit: p.provenance.exit, ...(runFailed(p.provenance.exit) ? { run_failed: true } : {}) } : {};

/**
 * Agent PRs through the control API, over the workflow in src/merge/propose.ts. Who may approve or reject is the
 * contract's (the owner); who may propose is checked here, twice (see propose).
 */
export class PrService implements Filer {
  constructor(
    private readonly homes: HomeSet, private readonly leases: LeaseService, private readonly readers: Readers, private readonly log: Logger,
    private readonly checkDirs: CheckDirs,
    /** In a cluster, a Home's PRs are filed and decided by its merge writer, wherever it runs (src/cluster). */
    private readonly cluster: Cluster | null = null,
  ) {}

  /** Every decision on a PR is one line of the log (info), with its ids. */
  private logged(pr: PullRequest, role: string, msg: string, extra: Record<string, unknown> = {}): PullRequest {
    this.log.info({ role, pr: pr.id, branch: pr.branch, state: pr.state, ...extra }, msg);
    return pr;
  }

  private home(role: string): PrHome {
    const home = this.homes.homeOf(role);
    return { role, store: home.store, trash: home.trash, prs: prsOf(home) };
  }

  /**
   * Whether the run a branch belongs to had the host's network (its lease's egress scope), from the run's record:
   * the same whoever proposes it (the run at its end, the owner later, a pick). Undefined for a branch no run made.
   */
  private async runEgress(role: string, run: string | undefined): Promise<boolean | undefined> {
    if (!run) return undefined;
    const home = this.homes.homeOf(role);
    return (await new RunStore(home.store, home.identity).get(run))?.egress;
  }

  private async owner(role: string): Promise<string> {
    return (await this.homes.snapshot(role)).config.role.owner ?? 'owner';
  }

  /** Needs propose:main on the branch; the lease must still hold when the PR is filed (checks take a while). */
  async propose(role: string, branch: string, opts: { intent?: string; checks?: string[]; exit?: string; reverts?: number }, creds: Credentials): Promise<PullRequest> {
    validateBranch(branch);
    const action = `propose ${role}/${branch}`;
    const who = await this.leases.authorize(role, branch, 'propose:main', creds, action);
    const intent = cleanIntent(opts.intent);
    const snap = await this.homes.snapshot(role, branch);
    if (snap.view!.expired) throw new UserError(`${snap.name} expired (its TTL passed): it can no longer be proposed`, 409);
    const unresolved = this.homes.mounted(role).records.get(branch)?.unresolved ?? [];
    if (unresolved.length > 0) {
      throw new UserError(`${snap.name} has files an update left for a person to decide (${unresolved.map((u) => u.path).join(', ')}): ` +
        `pick a side of each with nas branch resolve ${role}/${branch} <path> --take branch|main (the other goes to the recycle area), then propose again (no PR was created)`, 409);
    }
    const egress = await this.runEgress(role, snap.view!.run);
    if (this.cluster) {
      const result = await this.cluster.propose(role, {
        branch, head: snap.commit, intent, checks: opts.checks ?? [], principal: who.principal, lease: who.lease?.id, run: snap.view!.run, exit: opts.exit, egress,
        reads: snap.view!.reads.text(),
      });
      return this.merged(role, this.answered(role, result, 'pr proposed through the cluster'));
    }
    const judged = await judgeProposal({
      role, branch, intent, checks: opts.checks ?? [], store: snap.home.store, head: snap.commit, mainHead: snap.mainHead,
      mainConfig: snap.config, principal: who.principal, lease: who.lease?.id, run: snap.view!.run, exit: opts.exit, egress, reads: snap.view!.reads,
      checkDirs: this.checkDirs,
    });
    await this.leases.authorize(role, branch, 'propose:main', creds, action);
    if (opts.reverts) judged.pr.reverts = opts.reverts;
    const home = this.home(role);
    const pr = await home.prs.create(judged.pr, judged.reads);
    this.logged(pr, role, 'pr proposed', { principal: who.principal, lease: who.lease?.id ?? null, run: snap.view!.run ?? null, supersedes: pr.supersedes ?? [] });
    if (!judged.merge) return pr;
    return this.logged(await this.merged(role, mergePr(home, pr, 'policy')), role, 'pr decided by policy', { by: 'policy' });
  }

  async list(role: string): Promise<PrSummary[]> {
    return (await this.home(role).prs.list()).map((p) => ({
      id: p.id, branch: p.branch, state: p.state, intent: p.intent, principal: p.provenance.principal,
      checks: p.checks.map((c) => `${c.name}:${c.ok ? 'pass' : 'FAIL'}`).join(' '), created: p.created, updated: p.updated,
      ...(p.merged ? { merged_by: p.merged.by } : {}), ...(p.decision?.action === 'reject' ? { rejected_by: p.decision.by } : {}), ...exitOf(p),
      ...(p.imported ? { imported: p.imported } : {}), ...(p.superseded_by ? { superseded_by: p.superseded_by } : {}),
      ...(p.reverts ? { reverts: p.reverts } : {}),
    }));
  }

  /** One PR's record, whole. */
  get(role: string, id: number): Promise<PullRequest> {
    return findPr(this.home(role), id);
  }

  /**
   * What waits for a person, across every Home: waiting PRs first, then conflicts, then failures, each oldest
   * first, with everything needed to decide (the web page's inbox, `nas pr inbox`).
   */
  async decisions(): Promise<Decision[]> {
    const order: PullRequest['state'][] = ['waiting', 'conflict', 'failed'];
    const out: Decision[] = [];
    for (const role of this.homes.roles()) {
      for (const p of await this.home(role).prs.list()) {
        if (!order.includes(p.state)) continue;
        out.push({
          home: role, id: p.id, state: p.state, intent: p.intent, branch: p.branch, principal: p.provenance.principal,
          ...(p.provenance.run ? { run: p.provenance.run } : {}), created: p.created,
          files: p.changes.added + p.changes.modified + p.changes.deleted, paths: p.changes.paths.slice(0, 8),
          checks: p.checks.map((c) => ({ name: c.name, ok: c.ok })), reasons: p.reasons, ...exitOf(p),
          ...(p.imported ? { imported: p.imported } : {}),
        });
      }
    }
    return out.sort((a, b) => order.indexOf(a.state) - order.indexOf(b.state) || (a.created < b.created ? -1 : a.created > b.created ? 1 : 0));
  }

  /**
   * A PR with its patch and files, full modes included; what the caller could not read through the mount (the
   * branch's view) is named, not shown, and what it is shown counts as read by its own branch.
   */
  async show(role: string, id: number, creds: Credentials): Promise<PrDetail> {
    const home = this.home(role);
    const pr = await findPr(home, id);
    const [baseTree, headTree] = await Promise.all([pr.base, pr.head].map(async (c) => (await home.store.readCommit(c)).tree));
    const who = await this.readers.of(role, creds);
    const shown = await shownDiff(home.store, baseTree, headTree, {
      mayRead: this.readers.mayRead(who, home.store, this.homes.viewShare(role, pr.branch)), owner: this.homes.viewShare(role).owner,
    });
    await this.readers.record(who, shown.shown);
    const files = await mapLimit(shown.files, 8, async (c): Promise<PrFile> => {
      const [before, after] = await Promise.all([c.before, c.after].map(async (e) => (e && e.mode !== MODE.link ? home.store.readBlob(e.oid) : null)));
      // As git decides: a NUL in the first 8,000 bytes makes a file binary (not said of what is withheld).
      const binary = !c.withheld && [before, after].some((b) => b !== null && b.subarray(0, 8000).includes(0));
      return {
        path: c.path, status: c.status, binary, ...(before ? { before: before.length } : {}), ...(after ? { after: after.length } : {}),
        ...(c.beforeMode !== undefined ? { beforeMode: octal(c.beforeMode) } : {}), ...(c.afterMode !== undefined ? { afterMode: octal(c.afterMode) } : {}),
        ...(c.meta ? { meta: c.meta } : {}), ...(c.withheld ? { withheld: true } : {}),
      };
    });
    return { ...pr, diff: shown.patch, files, folders: shown.folders, withheld: shown.withheld, reads: await home.prs.reads(id) };
  }

  /** A file of a PR as its branch proposed it (the PR's head, kept whatever the branch does since) or as main has it now. */
  async file(role: string, id: number, side: string, path: string): Promise<PrFileContent> {
    if (side !== 'branch' && side !== 'main') throw new UserError(`"${side}": a PR's file is read from its branch or from main`);
    const rel = validateRelPath(path);
    // The files' metadata records are the Store's bookkeeping: no view shows them, so no PR serves them either.
    if (isMetaPath(rel)) throw new UserError(`${rel} is a metadata record (${META_ROOT}/), not a file of the Home; a PR shows a record's change as a change of its file: ask for that file's path`, 404);
    const home = this.home(role);
    const pr = await findPr(home, id);
    const commit = side === 'branch' ? pr.head : (await home.store.readRef(MAIN_REF))!;
    const entry = await home.store.lookupPath((await home.store.readCommit(commit)).tree, rel);
    if (!entry || entry.mode === MODE.tree) throw new UserError(`${rel} is not a file in ${side === 'branch' ? `the branch of PR ${id}` : 'main'}`, 404);
    return { path: rel, side, commit, content: (await home.store.readBlob(entry.oid)).toString('base64') };
  }

  async approve(role: string, id: number): Promise<PullRequest> {
    if (this.cluster) return this.merged(role, this.answered(role, await this.cluster.decide(role, { pr: id, action: 'approve' }), 'pr approved through the cluster'));
    const by = await this.owner(role);
    return this.logged(await this.merged(role, approvePr(this.home(role), id, by)), role, 'pr approved', { by });
  }

  async reject(role: string, id: number, why: string | undefined): Promise<PullRequest> {
    if (this.cluster) return this.answered(role, await this.cluster.decide(role, { pr: id, action: 'reject', ...(why ? { why } : {}) }), 'pr rejected through the cluster');
    const by = await this.owner(role);
    return this.logged(await rejectPr(this.home(role), id, by, why), role, 'pr rejected', { by, why: why ?? null });
  }

  /** The writer's answer to a proposal or a decision, as the PR it names (this host's records follow the server's). */
  private async answered(role: string, result: ProposalResult, msg: string): Promise<PullRequest & { cluster?: ClusterAnswer }> {
    if (result.error !== undefined || result.pr === undefined) throw new UserError(result.error ?? 'the merge writer filed no PR', result.status ?? 409);
    const cluster = { writer: result.writer ?? '', waited_ms: result.waited_ms ?? 0, published_at: result.published_at ?? '' };
    return { ...this.logged(await findPr(this.home(role), result.pr), role, msg, { proposal: result.id, ...cluster }), cluster };
  }

  // ---- the merge writer's side (cluster/writer.ts): on this host's Store, the caller checked on the proposing host

  /** Judge and file a queued proposal as propose() does here, and merge it if policy says so. */
  async fileProposal(role: string, p: Proposal): Promise<PullRequest> {
    const home = this.home(role);
    const m = this.homes.mounted(role);
    const mainHead = await m.home.mainHead();
    const judged = await judgeProposal({
      role, branch: p.branch, intent: p.intent, checks: p.checks, store: home.store, head: p.head, mainHead, mainConfig: await m.home.config(mainHead),
      principal: p.principal, lease: p.lease, run: p.run, exit: p.exit, egress: p.egress, reads: readsOf(p.reads), checkDirs: this.checkDirs,
    });
    judged.pr.provenance = { ...judged.pr.provenance, proposal: p.id, host: p.host };
    const pr = this.logged(await home.prs.create(judged.pr, judged.reads), role, 'pr proposed', { principal: p.principal, host: p.host, proposal: p.id });
    if (!judged.merge) return pr;
    return this.logged(await mergePr(home, pr, 'policy'), role, 'pr decided by policy', { by: 'policy' });
  }

  /** Filer.records: a Home's PRs on this host's Store, whole. */
  async records(role: string): Promise<PullRequest[]> {
    return this.home(role).prs.list();
  }

  /** Filer.record: one PR by id. */
  record(role: string, id: number): Promise<PullRequest | undefined> {
    return this.home(role).prs.get(id);
  }

  /** A person's decision taken on any host. */
  async carryOut(role: string, d: ClusterDecision): Promise<PullRequest> {
    const by = await this.owner(role);
    if (d.action === 'approve') return this.logged(await approvePr(this.home(role), d.pr, by), role, 'pr approved', { by, host: d.host });
    return this.logged(await rejectPr(this.home(role), d.pr, by, d.why), role, 'pr rejected', { by, why: d.why ?? null, host: d.host });
  }

  /** A branch expired: its PRs still waiting can no longer be decided (`states`: which PRs expire). */
  async expireBranch(role: string, branch: string, why = `its branch ${branch} expired before a decision`, states: PrState[] = ['waiting']): Promise<number[]> {
    const prs = this.home(role).prs;
    const waiting = (await prs.ofBranch(branch)).filter((p) => states.includes(p.state));
    for (const p of waiting) {
      const expired = await prs.transition(p.id, states, (pr) => {
        pr.state = 'expired';
        pr.reasons = [...pr.reasons, why];
      }).catch(() => undefined); // decided meanwhile: that decision stands
      if (expired) this.logged(expired, role, 'pr expired', { why });
    }
    return waiting.map((p) => p.id);
  }

  /** A branch is gone (discarded, removed after its grace, or merged and removed): its undecided PRs expire. */
  branchGone(role: string, branch: string, why: string): Promise<number[]> {
    return this.expireBranch(role, branch, why, [...SUPERSEDABLE]);
  }

  /**
   * Undecided PRs of a branch that no longer exists become expired: a catch-up for what went without nasd
   * (a branch ref deleted by hand, a crash between a removal and its PRs).
   */
  async expireStale(role: string, liveBranches: string[]): Promise<number[]> {
    const live = new Set(liveBranches);
    const gone = new Set((await this.home(role).prs.list()).filter((p) => SUPERSEDABLE.includes(p.state) && !live.has(p.branch)).map((p) => p.branch));
    const expired: number[] = [];
    for (const branch of gone) expired.push(...(await this.branchGone(role, branch, `its branch ${branch} was removed before a decision`)));
    return expired;
  }

  async stats(role: string): Promise<PrStats> {
    return prStats(await this.home(role).prs.list());
  }

  /** After a merge attempt, the main view follows at once, and a branch that merged is marked so (finished-work.ts). */
  private async merged(role: string, merging: Promise<PullRequest>): Promise<PullRequest> {
    const pr = await merging;
    await this.homes.refreshMains();
    // The merge stands whatever becomes of the mark: a branch left unmarked stays until its TTL.
    if (pr.state === 'merged') await markMerged(this.homes.mounted(role), pr).catch((err) => this.log.error({ err, role, pr: pr.id, branch: pr.branch }, 'cannot mark the branch merged'));
    return pr;
  }
}
