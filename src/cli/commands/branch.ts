import { Usage, branchSpec, splitTarget } from '../args.js';
import { command } from '../command.js';
import { short, size, table } from '../format.js';

export const help = {
  branch:
    'usage: nas branch create <role>/<branch> [--from <branch>|main] [--ttl 48h] [--run ID]\n' +
    '       nas branch list <role>\n       nas branch discard <role>/<branch>\n' +
    '       nas branch extend <role>/<branch> --ttl 24h\n       nas branch update <role>/<branch>\n' +
    '       nas branch resolve <role>/<branch> <path> --take branch|main\n' +
    '       nas branch move <role>@<branch> --to <host> [--force]\n\n' +
    'When a branch\'s TTL passes, what is pending is committed, its leases end, its view turns read-only\n' +
    '(EROFS) and its waiting PR is marked expired; after the Home\'s branch_grace (7d) its work goes to the\n' +
    'recycle area and it is removed. A branch whose PR merged is listed merged and removed after the Home\'s\n' +
    'merged_branch_grace (1d; a nas run branch at once), unless it took writes since (then it is live again).\n' +
    'extend (owner) makes it expire TTL from now, and makes an expired branch\n' +
    'writable again. A Home holds at most max_branches (.nas/limits.yaml) at once. discard (owner, or a lease with write on\n' +
    'the branch) moves the branch\'s work since it forked from main to the recycle area, then removes it.\n' +
    'update (owner, or a lease with write on the branch) merges main into the branch as a commit on it: a file both\n' +
    'changed in the same lines holds both versions between <<<<<<< <branch>, ======= and >>>>>>> main (listed; exit 1),\n' +
    'and the branch cannot be proposed until they are edited away. A file that cannot hold them (not text, deleted on\n' +
    'one side, a symlink) keeps one side\'s version for now and is unresolved (listed; exit 1): the branch cannot be\n' +
    'proposed until a person picks a side with resolve (by the same rights as update); the other side goes to the\n' +
    'recycle area.\n' +
    'move (owner; several hosts): the branch goes to another host; the host that holds it commits what is pending and\n' +
    'hands it over. --force, when that host is down, takes the head it last pushed (what it did not push stays there).\n',
};

/** What an update left in a file both sides changed. */
const RESOLVED = {
  markers: 'conflict markers', appended: 'main\'s version, then the branch\'s additions',
  'kept-branch': 'the branch\'s version kept', 'kept-main': 'main\'s version kept',
} as const;

export const commands = [
  command({
    name: 'branch create',
    doc: {
      usage: 'nas branch create <role>/<branch> [--from main] [--ttl 48h] [--run ID]',
      about: 'a writable view at `/agents/<role>@<branch>` (O(1): a ref, a record, an empty directory); when its TTL ' +
        'passes (checked every 5 s) what is pending is committed, the view turns read-only (`EROFS`, `workspace/`' +
        ' too), its leases are revoked, its waiting PRs become `expired` and it cannot be proposed; ' +
        '`branch_grace` after that (counted from when nasd expired it, in a later pass, and started again when ' +
        'the wall clock jumps forward) its work goes to the recycle area and it is removed',
    },
    route: 'createBranch',
    flags: ['from', 'ttl', 'run'],
    request: (args) => {
      const [role, branch] = branchSpec(args, 2);
      return { params: { role }, body: { branch, from: args.value('from'), ttl: args.value('ttl'), run: args.value('run') } };
    },
    print: (r) => `created branch ${r.view} from ${r.from} at ${short(r.base)} (ttl ${r.ttl}, expires ${r.expires}) in ${r.createdInMs} ms\n`,
  }),
  command({
    name: 'branch list',
    doc: {
      usage: 'nas branch list <role>',
      about: 'branches with head, state (`live`, `expired`, `merged (PR n)`), TTL, pending changes, quota use, and ' +
        'versioned and scratch bytes (`--json`: `merged: {pr, at, head}`)',
    },
    route: 'listBranches',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => table([
      ['BRANCH', 'HEAD', 'FROM', 'STATE', 'EXPIRES', 'PENDING', 'VERSIONED', 'SCRATCH'],
      ...r.map((b) => [b.name, short(b.head), b.from, b.host ? `on host ${b.host} (read-only here)` : b.merged ? `merged (PR ${b.merged.pr})` : b.expired ? 'expired' : 'live',
        b.expired ? `${b.expires} (expired)` : b.expires, String(b.pending), size(b.bytes?.versioned), size(b.bytes?.scratch)]),
    ]),
  }),
  command({
    name: 'branch extend',
    doc: {
      usage: 'nas branch extend <role>/<branch> --ttl 24h',
      about: 'owner: the branch now expires that long from now; an expired branch (in its grace period) takes writes ' +
        'again (its ended leases stay ended; propose it again)',
    },
    route: 'extendBranch',
    flags: ['ttl'],
    request: (args) => {
      const [role, branch] = branchSpec(args, 2);
      const ttl = args.value('ttl');
      if (!ttl) throw new Usage('name the new TTL: --ttl 24h (the branch then expires that long from now)');
      return { params: { role, branch }, body: { ttl } };
    },
    print: (r) => `${r.view} now expires ${r.expires} (ttl ${r.ttl})${r.reopened ? '; it had expired and takes writes again' : ''}\n`,
  }),
  command({
    name: 'branch update',
    doc: {
      usage: 'nas branch update <role>/<branch>',
      about: 'by the branch\'s write lease or the owner: merge main into the branch as a commit on it (two parents: the' +
        ' branch\'s head, main\'s), what is pending committed first and the view showing it at once; a file both ' +
        'changed in the same lines holds both versions between `<<<<<<< <branch>`, `=======` and `>>>>>>> main` ' +
        'and is listed (exit 1), and `nas propose` refuses the branch, naming the files, until the markers are ' +
        'edited away; an append-only file gets main\'s version then the branch\'s additions, a file that cannot ' +
        'hold markers (not text, a symlink, or deleted on one side) keeps the side that changed it for now and is' +
        ' *unresolved* (listed, exit 1): the branch cannot be proposed until a person picks a side with `nas ' +
        'branch resolve`, and a conflict in a read-only path (`.nas/`) refuses the update; main\'s side of a ' +
        'conflict the caller could not read through main\'s view is not written into the branch (the branch\'s side' +
        ' stays, listed), and a file that holds both sides takes the stricter of their two metadata records ' +
        '(owner and mode); an expired branch refuses it (409)',
    },
    route: 'updateBranch',
    request: (args) => {
      const [role, branch] = branchSpec(args, 2);
      return { params: { role, branch }, body: {} };
    },
    print: (r) => {
      if (r.upToDate) return `${r.view} already has everything on main (${short(r.main)})\n`;
      const lines = r.conflicts.map((c) => `  ${c.unresolved ? 'UNRESOLVED, ' : ''}${RESOLVED[c.resolution]}: ${c.path}${c.why ? ` (${c.why})` : ''}\n`);
      const marked = r.conflicts.some((c) => c.resolution === 'markers');
      const open = r.conflicts.filter((c) => c.unresolved);
      const spec = r.view.replace('@', '/');
      return `merged main (${short(r.main)}) into ${r.view}: ${short(r.head)}` +
        (lines.length ? `, ${lines.length} file(s) changed on both sides:\n${lines.join('')}` : '\n') +
        (marked ? 'edit the conflict markers away (keep what each file should say), then propose\n' : '') +
        (open.length ? `pick a side of each unresolved file: nas branch resolve ${spec} <path> --take branch|main (the other goes to the recycle area), then propose\n` : '');
    },
    failed: (r) => r.conflicts.some((c) => c.resolution === 'markers' || c.unresolved),
  }),
  command({
    name: 'branch resolve',
    doc: {
      usage: 'nas branch resolve <role>/<branch> <path> --take branch|main',
      about: 'by the branch\'s write lease or the owner: pick the side that stays of a file `nas branch update` left ' +
        'unresolved: the branch\'s version as it is now, or main\'s as the update merged it (with its owner and ' +
        'mode; only for a caller who may read it in main); the other side goes to the recycle area; once nothing ' +
        'is unresolved the branch can be proposed',
    },
    route: 'resolveBranch',
    flags: ['take'],
    request: (args) => {
      const [role, branch] = branchSpec(args, 2);
      const path = args.need(3, '<path>');
      const take = args.value('take');
      if (take !== 'branch' && take !== 'main') throw new Usage('pick a side: --take branch (the branch\'s version stays) or --take main (main\'s version replaces it)');
      return { params: { role, branch }, body: { path, take } };
    },
    print: (r) => `${r.path} in ${r.view}: ${r.took === 'main' ? 'main\'s' : 'the branch\'s'} version stays` +
      `${r.recycled ? `; the ${r.took === 'main' ? 'branch\'s' : 'main\'s'} went to the recycle area` : ''}\n` +
      (r.unresolved.length ? `still unresolved: ${r.unresolved.join(', ')}\n` : 'nothing left unresolved: the branch can be proposed\n'),
  }),
  command({
    name: 'branch discard',
    doc: {
      usage: 'nas branch discard <role>/<branch>',
      about: 'a losing parallel attempt: its work to the recycle area (with its modes and owners), the branch removed;' +
        ' a file still open in it gets `EIO` on write and fsync',
    },
    route: 'discardBranch',
    request: (args) => {
      const [role, branch] = branchSpec(args, 2);
      return { params: { role, branch }, body: {} };
    },
    print: (r) => `discarded ${r.discarded}; ${r.recycled.length} file(s) moved to the recycle area\n`,
  }),
  command({
    name: 'branch move',
    doc: {
      usage: 'nas branch move <role>@<branch> --to <host> [--force]',
      about: 'owner, several hosts: the branch goes to another host; the host that holds it commits what is pending ' +
        'and hands it over; `--force`, when that host is down, takes the head it last pushed (what it did not ' +
        'push stays there)',
    },
    route: 'moveBranch',
    flags: ['to', 'force'],
    request: (args) => {
      const [role, branch] = splitTarget(args.need(2, '<role>@<branch>'));
      const to = args.value('to');
      if (!branch || !to) throw new Usage('nas branch move <role>@<branch> --to <host> [--force]');
      return { params: { role, branch }, body: { to, force: args.has('force') } };
    },
    print: (r) => `${r.branch} moved from host ${r.from} to ${r.to} at ${short(r.head)}\n`,
  }),
];
