import { readFileSync } from 'node:fs';
import { Usage } from '../args.js';
import { command } from '../command.js';
import { prState, short, table } from '../format.js';

export const help = {
  home:
    'usage: nas home create <role> [--template default] [--owner NAME]\n       nas home list\n' +
    '       nas home config <role> <.nas/file> [--from LOCAL_FILE] [--intent TEXT]\n\n' +
    'config (owner) proposes a new version of one of the Home\'s .nas/ files (the content from --from, else from\n' +
    'standard input): it is checked first, committed on a new branch off main and proposed; the PR waits for\n' +
    'nas pr approve, as every metadata change does.\n',
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
    name: 'home config',
    route: 'proposeConfig',
    flags: ['from', 'intent'],
    request: (args) => {
      const role = args.need(2, '<role>');
      const file = args.need(3, '<.nas/file>');
      const from = args.value('from');
      if (!from && process.stdin.isTTY) throw new Usage('give the new content with --from FILE or on standard input');
      let content: string;
      try {
        content = readFileSync(from ?? 0, 'utf8');
      } catch (e) {
        throw new Usage(`cannot read ${from ?? 'standard input'}: ${(e as Error).message}`);
      }
      return { params: { role }, body: { file, content, intent: args.value('intent') } };
    },
    print: (r) => prState(r) + (r.state === 'waiting' ? `approve with: nas pr approve ${r.home} ${r.id}\n` : ''),
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
