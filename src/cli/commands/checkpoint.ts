import { Usage, splitTarget } from '../args.js';
import { command } from '../command.js';
import { short, table } from '../format.js';

export const help = {
  checkpoint:
    'usage: nas checkpoint create <role>[@<branch>] <name> [--message TEXT]\n       nas checkpoint list <role>\n' +
    '       nas checkpoint delete <role> <name>\n\n' +
    'A checkpoint names a commit of a branch (or of main) for good: its own ref keeps it, it never moves, and\n' +
    'only the owner deletes one. A branch\'s write lease or the owner makes one of a branch (what is pending is\n' +
    'committed first); of main, the owner. nas restore returns a branch to one.\n',
  restore:
    'usage: nas restore <role>@<branch> <checkpoint|commit> [--path P]...\n\n' +
    'Returns the branch\'s files (or those under each --path) to the checkpoint\'s or commit\'s state, as one new\n' +
    'commit on the branch: nothing is rewritten, and what the restore replaces or removes goes to the recycle area.\n' +
    'Main changes only by merge: restore into a branch, then propose it.\n',
};

export const commands = [
  command({
    name: 'checkpoint create',
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
    route: 'listCheckpoints',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => table([['NAME', 'BRANCH', 'COMMIT', 'BY', 'CREATED', 'MESSAGE'],
      ...r.map((c) => [c.name, c.branch, short(c.commit), c.by, c.created, c.message ?? ''])]),
  }),
  command({
    name: 'checkpoint delete',
    route: 'deleteCheckpoint',
    request: (args) => ({ params: { role: args.need(2, '<role>'), name: args.need(3, '<name>') }, body: {} }),
    print: (c) => `deleted checkpoint ${c.name} (${c.branch} at ${short(c.commit)}); the commit stays in history\n`,
  }),
  command({
    name: 'restore',
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
