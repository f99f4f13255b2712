import { command } from '../command.js';
import { short, table } from '../format.js';

export const help = { status: 'usage: nas status\n' };

export const commands = [
  command({
    name: 'status',
    route: 'status',
    request: () => ({ params: {}, body: {} }),
    print: (r) => table([['HOME', 'MAIN', 'BRANCHES'], ...r.homes.map((h) => [h.role, short(h.main), h.branches.join(', ') || '-'])]) +
      (r.metrics ? `metrics: ${r.metrics}\n` : ''),
  }),
];
