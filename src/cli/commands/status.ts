import { command } from '../command.js';
import { short, table } from '../format.js';

export const help = { status: 'usage: nas status\n' };

/** A Home's branches, each merged one marked (it goes after the Home's merged_branch_grace). */
const branchNames = (branches: string[], merged: string[] = []) => branches.map((b) => (merged.includes(b) ? `${b} (merged)` : b)).join(', ');

export const commands = [
  command({
    name: 'status',
    doc: {
      usage: 'nas status',
      about: 'Homes served, their main commit and branches (a merged one marked `(merged)`; `--json`: `merged`)',
    },
    route: 'status',
    request: () => ({ params: {}, body: {} }),
    print: (r) => table([['HOME', 'MAIN', 'BRANCHES'], ...r.homes.map((h) => [h.role, short(h.main), branchNames(h.branches, h.merged) || '-'])]) +
      (r.metrics ? `metrics: ${r.metrics}\n` : ''),
  }),
];
