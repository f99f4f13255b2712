import { command } from '../command.js';
import { short, table } from '../format.js';

export const help = { status: 'usage: nas status\n' };

/** A Home's branches, each merged one marked (it goes after the Home's merged_branch_grace). */
const branchNames = (branches: string[], merged: string[] = []) => branches.map((b) => (merged.includes(b) ? `${b} (merged)` : b)).join(', ');

/** How long since `iso`, as a person says it: `3d 4h`, `2h 5m`, `40s`. */
export function since(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  // The two largest units, the second even when 0 (`1d 0h`, not `1d 5m`).
  const units = [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]] as const;
  const first = units.findIndex(([, n]) => s >= n);
  if (first < 0) return '0s';
  return units.slice(first, first + 2).map(([unit, n], i) => `${i === 0 ? Math.floor(s / n) : Math.floor((s % units[first][1]) / n)}${unit}`).join(' ');
}

export const commands = [
  command({
    name: 'status',
    doc: {
      usage: 'nas status',
      about: 'nasd\'s version and uptime, the Homes served with their main commit, branches (a merged one marked ' +
        '`(merged)`) and PRs waiting for a person, and the problems to act on (`--json`: `merged`, `waiting`, `problems`)',
    },
    route: 'status',
    request: () => ({ params: {}, body: {} }),
    print: (r) => `nasd ${r.version}, pid ${r.pid}, up ${since(r.started)} (since ${r.started}), serving ${r.mount}\n` +
      table([['HOME', 'MAIN', 'WAITING', 'BRANCHES'],
        ...r.homes.map((h) => [h.role, short(h.main), String(h.waiting), branchNames(h.branches, h.merged) || '-'])]) +
      (r.metrics ? `metrics: ${r.metrics}\n` : '') +
      (r.problems.length ? `problems:\n${r.problems.map((p) => `  ${p}\n`).join('')}` : 'problems: none\n'),
  }),
];
