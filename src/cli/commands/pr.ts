import { Usage, branchSpec, type Args } from '../args.js';
import { command } from '../command.js';
import { folderLines, prState, table } from '../format.js';
import { runFailed } from '../../merge/merge-policy.js';

export const help = {
  propose:
    'usage: nas propose <role>/<branch> --into main --intent TEXT [--checks links,schema,memory,journal,...]\n\n' +
    'Needs $NAS_LEASE with propose:main on the branch (or the owner). Commits what is pending, diffs against main,\n' +
    'runs the checks main\'s .nas/ defines (its policy\'s required ones plus those asked for), and then merges\n' +
    '(all checks pass, nothing deleted, .nas/ untouched, no note marked reviewed, nothing read from inbox/) or\n' +
    'waits for nas pr approve. Exit 1 when checks fail or the merge conflicts.\n',
  pr:
    'usage: nas pr list <role>\n       nas pr inbox\n       nas pr show <role> <id>\n       nas pr approve <role> <id>\n' +
    '       nas pr reject <role> <id> --why TEXT\n       nas pr revert <role> <id>\n       nas pr stats <role>\n\n' +
    'inbox: what waits for a person in every Home, oldest first, then conflicts and failures, with why.\n' +
    'revert: propose the undoing of a merged PR as a new PR (branch revert-<id>), judged like any other.\n' +
    'approve, reject and revert are owner actions (also on the web page: nas web open).\n',
};

/** A run's network as its PR records it (lease scope egress, or loopback only). */
const egressText = (egress: boolean): string => (egress ? 'yes (lease scope egress: the host\'s network)' : 'no (loopback only: no outside connection)');

/** A run's exit status in a list: `3 FAILED`, `0`, or `-` for a PR that is not a run's. */
const exitMark = (p: { exit?: string; run_failed?: boolean }): string => (p.exit ? `${p.exit}${p.run_failed ? ' FAILED' : ''}` : '-');

/** A PR's state in a list, an imported copy marked (it was made, and decided on, in the Home exported). */
const stateMark = (p: { state: string; imported?: { from: string } }): string => (p.imported ? `${p.state} (imported from ${p.imported.from})` : p.state);

/** `<role> <id>` of the pr subcommands; the daemon refuses an id that is not a whole number. */
const prId = (args: Args) => ({ role: args.need(2, '<role>'), id: args.need(3, '<id>') });

/** What the run read (its briefing's files included), each path once, inbox items marked: the manifest's `<oid> <path>` lines. */
function readsLine(manifest: string, count: number | string, digest: string): string {
  const paths = [...new Set(manifest.split('\n').filter(Boolean).map((l) => l.slice(l.indexOf(' ') + 1)))].sort();
  const shown = paths.slice(0, 20).map((p) => (p.startsWith('inbox/') ? `${p} (untrusted input)` : p));
  const more = paths.length > shown.length ? `, and ${paths.length - shown.length} more (--json)` : '';
  return `reads: ${count} path(s)${shown.length ? `: ${shown.join(', ')}${more}` : ''}; digest ${digest}\n`;
}

export const commands = [
  command({
    name: 'propose',
    doc: {
      usage: 'nas propose <role>/<branch> --into main --intent TEXT [--checks links,schema,memory,journal]',
      about: 'commit, diff against main, run main\'s checks, then merge or wait for the owner',
    },
    route: 'propose',
    flags: ['into', 'intent', 'checks'],
    request: (args) => {
      const [role, branch] = branchSpec(args, 1);
      if ((args.value('into') ?? 'main') !== 'main') throw new Usage('--into: the only target is main');
      const checks = args.value('checks')?.split(',').map((c) => c.trim()).filter(Boolean);
      return { params: { role }, body: { branch, intent: args.value('intent'), checks } };
    },
    print: prState,
    failed: (r) => r.state === 'failed' || r.state === 'conflict',
  }),
  command({
    name: 'pr list',
    doc: {
      usage: 'nas pr list <role>',
      about: 'PRs (merged, waiting, conflict, failed, rejected, `superseded`: a later PR of the same branch was filed ' +
        'while it was waiting, in conflict or failed (`superseded_by`; approving or rejecting it is refused, ' +
        'naming the later one), `expired`: its branch expired or went (discarded, removed after its grace, merged' +
        ' and removed) before a decision)',
    },
    route: 'listPrs',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => (r.length === 0 ? 'no PRs\n' : table([['ID', 'BRANCH', 'STATE', 'RUN EXIT', 'CHECKS', 'INTENT'],
      ...r.map((p) => [String(p.id), p.branch, stateMark(p), exitMark(p), p.checks || '-', p.intent])])),
  }),
  command({
    name: 'pr inbox',
    doc: {
      usage: 'nas pr inbox',
      about: 'what waits for a person in every Home (waiting oldest first, then conflicts and failures), with why; ' +
        'superseded and expired PRs are not listed',
    },
    route: 'decisions',
    request: () => ({ params: {}, body: {} }),
    print: (r) => (r.length === 0 ? 'nothing waits for a decision\n' : table([['HOME', 'ID', 'STATE', 'RUN EXIT', 'SINCE', 'BRANCH', 'FILES', 'INTENT', 'WHY'],
      ...r.map((p) => [p.home, String(p.id), stateMark(p), exitMark(p), p.created, p.branch, String(p.files), p.intent, p.reasons.join('; ') || '-'])])),
  }),
  command({
    name: 'pr show',
    doc: {
      usage: 'nas pr show <role> <id>',
      about: 'one PR\'s diff, intent, provenance, checks, trust labels, reads',
    },
    route: 'showPr',
    request: (args) => ({ params: prId(args), body: {} }),
    print: (r) =>
      prState(r) +
      (r.imported ? `imported: made in Home ${r.imported.from}, came with ${r.imported.file} on ${r.imported.at}\n` : '') +
      (r.reverts ? `reverts: PR ${r.reverts} (nas pr show ${r.home} ${r.reverts})\n` : '') +
      (r.provenance.exit ? `run exit: ${r.provenance.exit}${runFailed(r.provenance.exit) ? ` (FAILED: the run's command did not succeed; its work may be unfinished)` : ' (succeeded)'}\n` : '') +
      (r.provenance.egress !== undefined ? `run egress: ${egressText(r.provenance.egress)}\n` : '') +
      `intent: ${r.intent}\nprovenance: principal ${r.provenance.principal}, lease ${r.provenance.lease ?? '-'}, run ${r.provenance.run ?? '-'}` +
      `${r.provenance.writers ? `, written by ${r.provenance.writers.join(', ')}` : ''}\n` +
      readsLine(r.reads, r.provenance.reads, r.provenance.reads_digest) +
      `trust: ${r.trust.notes_changed.length} note(s) changed, ${r.trust.unreviewed.length} unreviewed, ${r.trust.reviewed_claims.length} marked reviewed` +
      `${r.trust.reviewed_claims.length ? ` (${r.trust.reviewed_claims.join(', ')})` : ''}` +
      `${r.trust.start_set?.length ? `; session-start context changed: ${r.trust.start_set.join(', ')}` : ''}` +
      `${r.trust.mode_risk?.length ? `; modes a person must see (mode-risk): ${r.trust.mode_risk.join(', ')}` : ''}\n` +
      `changes: ${r.changes.added} added, ${r.changes.modified} modified, ${r.changes.deleted} deleted\n` + folderLines(r.folders) +
      `${r.withheld.length ? `withheld (you could not read them through the mount): ${r.withheld.join(', ')}\n` : ''}\n${r.diff}`,
  }),
  command({
    name: 'pr approve',
    doc: {
      usage: 'nas pr approve <role> <id>',
      about: 'owner: merge a waiting PR',
    },
    route: 'approvePr',
    request: (args) => ({ params: prId(args), body: {} }),
    print: (r) => prState(r) + (r.decision?.why ? `why: ${r.decision.why}\n` : ''),
    failed: (r) => r.state === 'conflict',
  }),
  command({
    name: 'pr reject',
    doc: {
      usage: 'nas pr reject <role> <id> --why TEXT',
      about: 'owner: turn a waiting PR down, with the reason',
    },
    route: 'rejectPr',
    flags: ['why'],
    request: (args) => ({ params: prId(args), body: { why: args.value('why') } }),
    print: (r) => prState(r) + (r.decision?.why ? `why: ${r.decision.why}\n` : ''),
    failed: (r) => r.state === 'conflict',
  }),
  command({
    name: 'pr revert',
    doc: {
      usage: 'nas pr revert <role> <id>',
      about: 'owner: undo a merged PR through the gate: its inverse on today\'s main is committed on a new branch revert-<id> and ' +
        'proposed as a new PR ("Revert PR <id>: ..."), which merges by policy or waits for a person like any other; refused, naming ' +
        'the files, when main changed them since so the inverse does not apply cleanly; main is never written directly',
    },
    route: 'revertPr',
    request: (args) => ({ params: prId(args), body: {} }),
    print: (r) => `reverts PR ${r.reverts} on branch ${r.branch}\n` + prState(r),
    failed: (r) => r.state === 'failed' || r.state === 'conflict',
  }),
  command({
    name: 'pr stats',
    doc: {
      usage: 'nas pr stats <role>',
      about: 'merged by policy, approved, rejected, waiting; approval rate',
    },
    route: 'prStats',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) =>
      `${r.total} PR(s): ${r.merged_by_policy} merged by policy, ${r.approved} approved, ${r.rejected} rejected, ${r.waiting} waiting, ` +
      `${r.failed} failed, ${r.conflict} in conflict\napproval rate ${r.approval_rate ?? '-'}%, merged by policy ${r.auto_merge_rate ?? '-'}%\n`,
  }),
];
