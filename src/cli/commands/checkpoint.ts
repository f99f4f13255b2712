import { Usage, splitTarget, wholeNumber } from '../args.js';
import { command } from '../command.js';
import { folderLines, short, table } from '../format.js';

export const help = {
  checkpoint:
    'usage: nas checkpoint create <role>[@<branch>] <name> [--message TEXT]\n       nas checkpoint list <role>\n' +
    '       nas checkpoint delete <role> <name>\n\n' +
    'A checkpoint names a commit of a branch (or of main) for good: its own ref keeps it, it never moves, and\n' +
    'only the owner deletes one. A branch\'s write lease or the owner makes one of a branch (what is pending is\n' +
    'committed first); of main, the owner. nas restore returns a branch to one.\n',
  log:
    'usage: nas log <role>[@<branch>] [PATH] [--limit N]\n\nThe history of a branch (or main), newest first: commit, time, subject,' +
    ' and who and why from the commit\'s\nNas-* trailers (principal, run, lease, intent). With a path, only commits that changed it, and only to\n' +
    'a caller who could read it through the mount.\n',
  diff:
    'usage: nas diff <role>[@<branch>] [A] [B] [--path P]\n\nThe changes from A to B (checkpoint names or commit ids). By default: a branch\'s fork' +
    ' point to its head; on main,\nits last change. A file the caller could not read through the mount (its mode, owner, the inbox) is named,\n' +
    'its content withheld: a run reads as its user, a lease holder as its principal, the owner sees everything.\n',
  restore:
    'usage: nas restore <role>@<branch> <checkpoint|commit> [--path P]...\n\n' +
    'Returns the branch\'s files (or those under each --path) to the checkpoint\'s or commit\'s state, as one new\n' +
    'commit on the branch: nothing is rewritten, and what the restore replaces or removes goes to the recycle area.\n' +
    'Main changes only by merge: restore into a branch, then propose it.\n',
};

export const commands = [
  command({
    name: 'log',
    doc: {
      usage: 'nas log <role>[@<branch>] [PATH] [--limit 50]',
      about: 'history newest first with author and the commit\'s `Nas-*` trailers (principal, run, lease, intent); ' +
        '`--json` too',
    },
    route: 'log',
    flags: ['limit'],
    request: (args) => {
      const [role, branch] = splitTarget(args.need(1, '<role>[@<branch>]'));
      return { params: { role }, body: { branch, path: args.positional[2], limit: wholeNumber(args, 'limit', '--limit takes a whole number') } };
    },
    print: (r) => r.map((e) => {
      const t = e.trailers;
      // A merge names who proposed it and who let it in (policy, or the owner who approved), not one "by".
      const merged = t['Nas-Merged-By'];
      const who = [t['Nas-Principal'] && `${merged ? 'proposed ' : ''}by ${t['Nas-Principal']}`,
        merged && (merged === 'policy' ? 'merged by policy' : `approved by ${merged}`), t['Nas-Run'] && t['Nas-Run'] !== '-' && `run ${t['Nas-Run']}`,
        t['Nas-Lease'] && t['Nas-Lease'] !== '-' && `lease ${t['Nas-Lease']}`].filter(Boolean).join(', ');
      return `${short(e.commit)}  ${e.time}  ${e.subject}${who ? `  (${who})` : ''}${t['Nas-Intent'] ? `\n    intent: ${t['Nas-Intent']}` : ''}\n`;
    }).join(''),
  }),
  command({
    name: 'diff',
    doc: {
      usage: 'nas diff <role>[@<branch>] [A] [B] [--path P]',
      about: 'the patch between two checkpoints or commits (default: a branch\'s fork point to its head, main\'s last ' +
        'change); `--json` too',
    },
    route: 'diff',
    flags: ['path'],
    request: (args) => {
      const [role, branch] = splitTarget(args.need(1, '<role>[@<branch>]'));
      const paths = args.list('path');
      if (paths.length > 1) throw new Usage('diff takes one --path');
      return { params: { role }, body: { branch, from: args.positional[2], to: args.positional[3], path: paths[0] } };
    },
    print: (r) => `${r.view}: ${short(r.from)}..${short(r.to)}, ${r.changes.length} file(s)${r.folders?.length ? ` and ${r.folders.length} folder(s)` : ''} changed\n` +
      folderLines(r.folders) + `${r.withheld.length ? `withheld (you could not read them through the mount): ${r.withheld.join(', ')}\n` : ''}${r.patch}`,
  }),
  command({
    name: 'checkpoint create',
    doc: {
      usage: 'nas checkpoint create <role>[@<branch>] <name> [--message M]',
      about: 'a named, immutable ref to a commit (`refs/nas/checkpoints/<name>`, record in ' +
        '`refs/nas/checkpoint-records`: commit, branch, by, when, message); of a branch by its write lease or the' +
        ' owner (pending work committed first), of main by the owner; each shows read-only at ' +
        '`/agents/<role>:<name>` (\':\' is in no role or branch name; a checkpoint name never looks like a commit ' +
        'id)',
    },
    route: 'createCheckpoint',
    flags: ['message'],
    request: (args) => {
      const [role, branch] = splitTarget(args.need(2, '<role>[@<branch>]'));
      return { params: { role }, body: { name: args.need(3, '<name>'), branch, message: args.value('message') } };
    },
    print: (c) => `checkpoint ${c.name}: ${c.branch} at ${short(c.commit)} (by ${c.by}, ${c.created})\n`,
  }),
  command({
    name: 'checkpoint list',
    doc: {
      usage: 'nas checkpoint list <role>',
      about: 'a Home\'s checkpoints: name, commit, branch, by, when, message',
    },
    route: 'listCheckpoints',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => table([['NAME', 'BRANCH', 'COMMIT', 'BY', 'CREATED', 'MESSAGE'],
      ...r.map((c) => [c.name, c.branch, short(c.commit), c.by, c.created, c.message ?? ''])]),
  }),
  command({
    name: 'checkpoint delete',
    doc: {
      usage: 'nas checkpoint delete <role> <name>',
      about: 'owner: remove a checkpoint (only the owner deletes one)',
    },
    route: 'deleteCheckpoint',
    request: (args) => ({ params: { role: args.need(2, '<role>'), name: args.need(3, '<name>') }, body: {} }),
    print: (c) => `deleted checkpoint ${c.name} (${c.branch} at ${short(c.commit)}); the commit stays in history\n`,
  }),
  command({
    name: 'restore',
    doc: {
      usage: 'nas restore <role>@<branch> <checkpoint|commit> [--path P]...',
      about: 'return the branch\'s files (or those under each path) to that state as one new commit; what it replaces ' +
        'or removes goes to the recycle area; `.nas/` is left and reported; main changes only by merge (restore ' +
        'into a branch, then propose)',
    },
    route: 'restore',
    flags: ['path'],
    request: (args) => {
      const [role, branch] = splitTarget(args.need(1, '<role>@<branch>'));
      if (!branch) throw new Usage('name the branch to restore into: <role>@<branch> (main changes only by merge)');
      return { params: { role }, body: { branch, from: args.need(2, '<checkpoint|commit>'), paths: args.list('path') } };
    },
    print: (r) => `restored ${r.view} to ${short(r.from)}: ${r.restored.length} file(s) written, ${r.removed.length} removed ` +
      `(to the recycle area); now at ${short(r.head)}\n` + r.refused.map((x) => `  not restored: ${x.path}: ${x.reason}\n`).join(''),
    failed: (r) => r.refused.length > 0,
  }),
];
