import { splitSpec } from '../args.js';
import { command } from '../command.js';
import { short } from '../format.js';

export const help = {
  sync: 'usage: nas sync <role>[/<branch>]\n\nCommits every pending change of the branch (or of all branches of the Home) and waits for it.\n',
};

export const commands = [
  command({
    name: 'sync',
    doc: {
      usage: 'nas sync <role>[/<branch>]',
      about: 'commit everything pending now and wait for it',
    },
    route: 'sync',
    request: (args) => {
      const [role, branch] = splitSpec(args.need(1, '<role>[/<branch>]'));
      return { params: { role }, body: { branch } };
    },
    print: (r) => Object.entries(r).map(([view, head]) => `${view} ${short(head)}\n`).join(''),
  }),
];
