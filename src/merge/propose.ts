import type { HomeConfig } from '../config/home-config.js';
import { MAIN_REF } from '../store/refs.js';
import type { Change, FolderChange, Identity, Store } from '../store/store.js';
import type { Trash } from '../trash/trash.js';
import { UserError } from '../util/errors.js';
import { nasTrailers } from '../util/text.js';
import { treeFiles } from '../memory/files.js';
import { isNote } from '../memory/layout.js';
import { branchMemory } from '../memory/branch-memory.js';
import type { Memory } from '../memory/model.js';
import { autoLoadedChanges, linkedFromAgents } from '../memory/start-set.js';
import { knownChecks, parseCheckDefinitions, runChecks } from './checks.js';
import type { CheckDirs } from './check-sandbox.js';
import { changedOnBothSides, mergeIntoMain, type MergeOutcome } from './merge.js';
import { markedFiles } from './update.js';
import { needsPerson } from './structured.js';
import { decide, runFailed } from './merge-policy.js';
import { modeRisks as findModeRisks } from './mode-risk.js';
import { PrStateConflict, PrStore, type PrState, type PullRequest } from './pr-store.js';
import { meter } from '../metrics/meter.js';

/**
 * The Agent PR workflow (SPEC.md, Agent Branch, requirement 4): judge a branch against main (its checks,
 * its policy), file the PR, merge it by policy or on the owner's approval, or turn it down. Callers
 * authorize first; this module knows Stores and PRs, not credentials or sockets.
 */

/** What the run read, as the branch view's read manifest records it. */
export interface Reads {
  paths(): string[];
  digest(): string;
  text(): string;
}

export interface ProposalInput {
  role: string;
  branch: string;
  intent: string;
  /** Checks asked for beyond the ones main's policy requires. */
  checks: string[];
  store: Store;
  /** The branch's committed head, and main's head with its metadata (everything that judges the PR). */
  head: string;
  mainHead: string;
  mainConfig: HomeConfig;
  principal: string;
  lease?: string;
  run?: string;
  /** How the run's command ended (`0`, `1`, `SIGTERM`), when the branch is a run's (nas run). */
  exit?: string;
  /** Whether the run had the host's network (its lease's egress scope), when the branch is a run's. */
  egress?: boolean;
  reads: Reads;
  /** Where custom checks get their directories (nasd's runtime directory). */
  checkDirs: CheckDirs;
}

/** A PR ready to be filed, and whether policy merges it at once. */
export interface Judged {
  pr: Omit<PullRequest, 'id'>;
  reads: string;
  merge: boolean;
}

/** The intent as it goes into the merge commit: one line of plain text. */
export function cleanIntent(raw: string | undefined): string {
  const intent = (raw ?? '').replace(/\s+/g, ' ').trim();
  if (!intent) throw new UserError('say what the change is for: --intent "..." (it goes into the merge commit)');
  if (/[\x00-\x1f\x7f]/.test(intent)) throw new UserError('--intent must be plain text: no control characters');
  if (intent.length > 500) throw new UserError('--intent is over 500 characters: one sentence is enough');
  return intent;
}

/**
 * Diff the branch against main, run the checks main defines, and apply main's policy: merge by itself, wait
 * for the owner, or fail. Refused (nothing to file) when the branch changed nothing.
 */
export async function judgeProposal(p: ProposalInput): Promise<Judged> {
  const { store } = p;
  const name = `${p.role}@${p.branch}`;
  const base = await store.mergeBase(p.head, p.mainHead);
  if (!base) throw new UserError(`${name} shares no history with main`, 409);
  const [baseTree, headTree, mainTree] = await Promise.all([base, p.head, p.mainHead].map(async (c) => (await store.readCommit(c)).tree));
  const plan = await checkPlan(p, mainTree);
  const { changes, folders } = await proposedChanges(p, name, baseTree, headTree);

  const writers = await writersSince(store, p.head, base);
  const memory = await branchMemory(store, treeFiles(store, headTree), p.head, p.mainHead);
  const checks = await runChecks(
    { store, head: headTree, base: baseTree, main: mainTree, changes, memory, limits: p.mainConfig.limits, checkDirs: p.checkDirs }, plan.names, plan.custom, plan.definitionProblems,
  );
  const trust = await trustFacts(store, memory, changes, folders, baseTree, headTree);
  const policy = p.mainConfig.policy;
  const decision = decide({
    auto: policy.merge.auto,
    policyProblems: plan.policyProblems,
    checks,
    deleted: byFolder(changes.filter((c) => c.status === 'deleted').map((c) => c.path),
      (await store.folderChanges(headTree, baseTree)).filter((f) => f.status === 'added').map((f) => f.path)),
    metadata: changes.filter((c) => c.path.startsWith('.nas/')).map((c) => c.path),
    reviewedClaims: trust.claims,
    // Its own Home's inbox, or a shared Home's (`<home>:inbox/...`): untrusted input either way.
    inboxReads: p.reads.paths().filter((x) => /^(?:[^/:]+:)?inbox\//.test(x)),
    startSet: trust.startSet,
    modeRisks: trust.modeRisks,
    ...(runFailed(p.exit) ? { failedRun: p.exit } : {}),
    egressToPerson: p.egress === true && policy.merge.egress === 'person',
    needsPerson: (await changedOnBothSides(store, baseTree, mainTree, headTree, changes)).filter((path) => needsPerson(path, p.mainConfig.merge)),
  });
  const now = new Date().toISOString();
  const state: PrState = decision.action === 'fail' ? 'failed' : decision.action === 'merge' ? 'merging' : 'waiting';
  const pr: Omit<PullRequest, 'id'> = {
    home: p.role, branch: p.branch, target: 'main', state, intent: p.intent,
    created: now, updated: now, head: p.head, base, target_head: p.mainHead,
    provenance: provenanceOf(p, writers),
    changes: changeCounts(changes, folders),
    checks: checks.map((c) => ({ name: c.name, ok: c.ok, ms: c.ms, output: c.output })),
    trust: {
      notes_changed: trust.notes, unreviewed: trust.unreviewed, reviewed_claims: trust.claims, start_set: trust.startSet,
      ...(trust.modeRisks.length ? { mode_risk: trust.modeRisks } : {}),
    },
    reasons: decision.action === 'merge' ? [] : decision.reasons,
  };
  return { pr, reads: p.reads.text(), merge: decision.action === 'merge' };
}

/**
 * The checks to run (those main's policy requires and main defines, and those asked for), their definitions, and
 * what keeps the policy from merging anything by itself. Refused when a check asked for is not defined.
 */
async function checkPlan(p: ProposalInput, mainTree: string) {
  // Everything that judges the PR comes from main, never from the branch.
  const policy = p.mainConfig.policy;
  const checksEntry = await p.store.lookupPath(mainTree, '.nas/checks.yaml');
  const defs = parseCheckDefinitions(checksEntry ? (await p.store.readBlob(checksEntry.oid)).toString() : null);
  const known = knownChecks(defs.checks);
  const unknown = p.checks.filter((c) => !known.includes(c));
  if (unknown.length > 0) throw new UserError(`unknown check(s) ${unknown.join(', ')}; main defines: ${known.join(', ')}`);
  const names = [...new Set([...policy.merge.required_checks.filter((c) => known.includes(c)), ...p.checks])];
  // A required check main does not define is a policy problem: nothing merges by itself until it is fixed.
  const missing = policy.merge.required_checks.filter((c) => !known.includes(c));
  const policyProblems = [
    ...p.mainConfig.problems.filter((x) => x.startsWith('.nas/policy.yaml')),
    ...(missing.length > 0 ? [`.nas/policy.yaml: merge.required_checks names unknown check(s) ${missing.join(', ')}`] : []),
  ];
  return { names, custom: defs.checks, definitionProblems: defs.problems, policyProblems };
}

/** The branch's file and folder changes against main; refused when there are none, or conflict markers are left. */
async function proposedChanges(p: ProposalInput, name: string, baseTree: string, headTree: string): Promise<{ changes: Change[]; folders: FolderChange[] }> {
  const [changes, folders] = await Promise.all([p.store.fileChanges(baseTree, headTree), p.store.folderChanges(baseTree, headTree)]);
  if (changes.length === 0 && folders.length === 0) throw new UserError(`nothing to propose: ${name} has no changes against main (no PR was created)`, 409);
  const marked = await markedFiles(p.store, changes, p.branch);
  if (marked.length > 0) {
    throw new UserError(`${name} still holds the conflict markers nas branch update left (<<<<<<< ${p.branch} ... >>>>>>> main) in ` +
      `${marked.join(', ')}: edit each file to what it should say, then propose again (no PR was created)`, 409);
  }
  return { changes, folders };
}

/**
 * What the change does to what agents trust: the notes it changes (and which of those are unreviewed), the notes it
 * marks reviewed, what agents load at session start, and modes a person must see.
 */
async function trustFacts(store: Store, memory: Memory, changes: Change[], folders: FolderChange[], baseTree: string, headTree: string) {
  const notes = changes.filter((c) => c.after && isNote(c.path)).map((c) => c.path);
  const textOf = async (oid: string) => (await store.readBlob(oid)).toString();
  const agents = await Promise.all([baseTree, headTree].map(async (t) => {
    const e = await store.lookupPath(t, 'AGENTS.md');
    return e ? textOf(e.oid) : null;
  }));
  const startSet = await autoLoadedChanges(changes, textOf, linkedFromAgents(agents));
  const modeRisks = await findModeRisks(store, baseTree, headTree, changes, folders.map((f) => f.path));
  const trustOf = (path: string) => memory.docs.get(path)?.note?.trust;
  const claims = changes.filter((c) => c.after && c.path.startsWith('memory/') && trustOf(c.path) === 'reviewed').map((c) => c.path);
  return { notes, unreviewed: notes.filter((x) => trustOf(x) !== 'reviewed'), claims, startSet, modeRisks };
}

/** Who proposed, for which run, and what it read; `writers`: who really wrote (writersSince). */
function provenanceOf(p: ProposalInput, writers: string[]): PullRequest['provenance'] {
  return {
    principal: p.principal, ...(p.lease ? { lease: p.lease } : {}),
    ...(p.run ? { run: p.run } : {}), ...(p.exit !== undefined ? { exit: p.exit } : {}),
    ...(p.egress !== undefined ? { egress: p.egress } : {}), ...(writers.length ? { writers } : {}), reads: p.reads.paths().length, reads_digest: p.reads.digest(),
  };
}

/** The PR's count of changes. A new folder is listed as added, `A dir/`; one whose mode, owner or times changed as modified, `M dir/`. */
function changeCounts(changes: Change[], folders: FolderChange[]): PullRequest['changes'] {
  const count = (s: string) => changes.filter((c) => c.status === s).length;
  return {
    added: count('added') + folders.filter((f) => f.status === 'added').length,
    modified: count('modified') + folders.filter((f) => f.status === 'modified').length, deleted: count('deleted'),
    paths: [...changes.map((c) => `${c.status[0].toUpperCase()} ${c.path}`), ...folders.map((f) => `${f.status[0].toUpperCase()} ${f.path}/`)],
  };
}

/**
 * The accounts named by the Nas-Writers trailers of the branch's own commits (first parents from head back to
 * where it forked): who really wrote, which may differ from the principal the PR is credited to.
 */
async function writersSince(store: Store, head: string, base: string): Promise<string[]> {
  const writers = new Set<string>();
  // Past a merge of main into the branch (nas branch update), first parents lead into main's history: stop there.
  let pastMerge = false;
  for (let c: string | undefined = head, seen = 0; c && c !== base && seen < 10_000; seen++) {
    if (pastMerge && (await store.mergeBase(c, base)) === c) break;
    const commit = await store.readCommit(c);
    pastMerge ||= commit.parents.length > 1;
    for (const w of nasTrailers(commit.message)['Nas-Writers']?.split(', ') ?? []) writers.add(w);
    c = commit.parents[0];
  }
  return [...writers].sort();
}

/** Where a Home's PRs live and where merges go: its Store, recycle area and PR records. */
export interface PrHome {
  role: string;
  store: Store;
  trash: Trash;
  prs: PrStore;
}

/** Merge a PR's head into main (by policy or by the owner) and record the outcome on the PR. */
export async function mergePr(home: PrHome, pr: PullRequest, by: string): Promise<PullRequest> {
  const trailers = [
    `Nas-PR: ${pr.id}`, `Nas-Branch: ${pr.branch}`, `Nas-Run: ${pr.provenance.run ?? '-'}`,
    ...(pr.provenance.exit !== undefined ? [`Nas-Exit: ${pr.provenance.exit}`] : []),
    ...(pr.provenance.egress !== undefined ? [`Nas-Egress: ${pr.provenance.egress ? 'yes' : 'no'}`] : []), `Nas-Lease: ${pr.provenance.lease ?? '-'}`,
    `Nas-Principal: ${pr.provenance.principal}`, ...(pr.provenance.writers ? [`Nas-Writers: ${pr.provenance.writers.join(', ')}`] : []),
    `Nas-Intent: ${pr.intent}`,
    `Nas-Checks: ${pr.checks.map((c) => `${c.name}=${c.ok ? 'pass' : 'fail'}`).join(', ') || '-'}`,
    `Nas-Reads-Digest: ${pr.provenance.reads_digest}`, `Nas-Merged-By: ${by}`,
    ...(pr.provenance.proposal ? [`Nas-Proposal: ${pr.provenance.proposal}`, `Nas-Host: ${pr.provenance.host}`] : []),
  ];
  let outcome: MergeOutcome;
  const started = performance.now();
  const decidedBy = by === 'policy' ? 'policy' : 'owner';
  try {
    outcome = await mergeIntoMain(home.store, home.trash, {
      head: pr.head, run: pr.provenance.run,
      message: `Merge PR ${pr.id} from ${pr.branch}: ${pr.intent}\n\n${trailers.join('\n')}\n`,
      author: { name: pr.provenance.principal, email: `${pr.provenance.principal}@agent-nas` },
    });
  } catch (err) {
    // Back to the owner rather than stuck "merging": approving again merges, or finds main up to date.
    pr.state = 'waiting';
    pr.reasons = [`the merge did not complete (${(err as Error).message}); approve it again`];
    await home.prs.update(pr);
    meter.merge(decidedBy, 'error', (performance.now() - started) / 1000);
    throw err;
  }
  meter.merge(decidedBy, outcome.kind === 'merged' ? 'merged' : outcome.kind === 'conflict' ? 'conflict' : 'up_to_date', (performance.now() - started) / 1000);
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
  return pr;
}

/** One decision at a time: the PR must still be in an expected state when the decision is written. */
async function transition(prs: PrStore, id: number, from: PrState[], change: (pr: PullRequest) => void, refusal: string): Promise<PullRequest> {
  try {
    return await prs.transition(id, from, change);
  } catch (err) {
    if (err instanceof PrStateConflict) {
      throw new UserError(`${err.message}: ${refusal}${/failed|conflict/.test(err.message) ? ' (fix the branch and propose again)' : ''}`, 409);
    }
    throw err;
  }
}

/** A PR by id, or a clear refusal. */
export async function findPr(home: PrHome, id: number): Promise<PullRequest> {
  if (!Number.isInteger(id) || id < 1) throw new UserError('a PR id is a whole number (see nas pr list)');
  const pr = await home.prs.get(id);
  if (!pr) throw new UserError(`Home ${home.role} has no PR ${id}; see nas pr list ${home.role}`, 404);
  return pr;
}

/** A PR a later one of its branch replaced takes no decision: the refusal names the one that does. */
function refuseSuperseded(home: PrHome, pr: PullRequest, action: string): void {
  if (pr.state !== 'superseded') return;
  const later = pr.superseded_by;
  throw new UserError(`PR ${pr.id} was superseded by PR ${later}, a later PR of branch ${pr.branch}, so it cannot be ${action}: ` +
    `decide PR ${later} instead (nas pr show ${home.role} ${later})`, 409);
}

/** The owner approves a waiting PR: it merges. */
export async function approvePr(home: PrHome, id: number, owner: string): Promise<PullRequest> {
  refuseSuperseded(home, await findPr(home, id), 'approved');
  const pr = await transition(home.prs, id, ['waiting'], (p) => {
    p.state = 'merging';
    p.decision = { by: owner, at: new Date().toISOString(), action: 'approve' };
  }, 'only a waiting PR can be approved');
  meter.decided('approve', (Date.parse(pr.decision!.at) - Date.parse(pr.created)) / 1000);
  return mergePr(home, pr, owner);
}

/** The owner turns a PR down, saying why (the run reads it). */
export async function rejectPr(home: PrHome, id: number, owner: string, why: string | undefined): Promise<PullRequest> {
  if (!why?.trim()) throw new UserError('say why: --why "..." (the run reads it)');
  refuseSuperseded(home, await findPr(home, id), 'rejected');
  const pr = await transition(home.prs, id, ['waiting', 'conflict', 'failed'], (p) => {
    p.state = 'rejected';
    p.decision = { by: owner, at: new Date().toISOString(), action: 'reject', why: why.trim() };
  }, 'it can no longer be rejected');
  meter.decided('reject', (Date.parse(pr.decision!.at) - Date.parse(pr.created)) / 1000);
  return pr;
}

export interface PrStats {
  total: number;
  merged_by_policy: number;
  approved: number;
  rejected: number;
  waiting: number;
  failed: number;
  conflict: number;
  /** Percent of the owner's decisions that approved; null before any. */
  approval_rate: number | null;
  auto_merge_rate: number | null;
}

/** How the Human Gate is doing: review fatigue is real, so the approval rate is measured. */
export function prStats(prs: PullRequest[]): PrStats {
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

/** A Home's PR records, read and written in its Store. */
export const prsOf = (home: { store: Store; identity: Identity }): PrStore => new PrStore(home.store, home.identity);

/**
 * Deleted files as a person reads them: a folder the branch removed whole stands for the files deleted below it
 * (`outbox/bulk/ (300 files)`, once, where its first file stood), not one path per file; a lone file stays itself.
 */
export function byFolder(paths: string[], removedFolders: string[]): string[] {
  const tops = removedFolders.filter((f) => !removedFolders.some((g) => f.startsWith(`${g}/`)));
  const counts = new Map<string, number>();
  const out: string[] = [];
  for (const path of paths) {
    const top = tops.find((f) => path.startsWith(`${f}/`));
    if (!top) out.push(path);
    else if (!counts.has(top)) out.push(top);
    if (top) counts.set(top, (counts.get(top) ?? 0) + 1);
  }
  return out.flatMap((x) => {
    const n = counts.get(x);
    if (n === undefined) return [x];
    return n > 1 ? [`${x}/ (${n} files)`] : paths.filter((p) => p.startsWith(`${x}/`));
  });
}
