import { command } from '../command.js';
import { short, table } from '../format.js';

export const help = {
  home: 'usage: nas home create <role> [--template default] [--owner NAME]\n       nas home list\n',
};

export const commands = [
  command({
    name: 'home create',
    route: 'createHome',
    flags: ['template', 'owner'],
    request: (args) => ({ params: {}, body: { role: args.need(2, '<role>'), template: args.value('template'), owner: args.value('owner') } }),
    print: (r) => `created Home ${r.role} (store ${r.store})\n`,
  }),
  command({
    name: 'home list',
    route: 'listHomes',
    request: () => ({ params: {}, body: {} }),
    print: (r) =>
      table([['HOME', 'MAIN', 'BRANCHES', 'STORE'], ...r.map((h) => [h.role, short(h.main), h.branches.join(', ') || '-', h.store])]) +
      r.flatMap((h) => h.problems.map((p) => `warning: ${h.role}: ${p}\n`)).join(''),
  }),
];
