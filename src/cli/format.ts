import type { PullRequest } from '../merge/pr-store.js';
import type { Finding } from '../memory/check.js';
import type { ShownFolder } from '../merge/shown-diff.js';
import { metaText } from '../util/display.js';

/** Text shared by several commands' output: tables, indented blocks, check findings, a PR's state. */

/** Columns padded to the widest cell; the last column is not padded. The first row is the header. */
export const table = (rows: string[][]): string => {
  if (rows.length === 0) return '';
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n') + '\n';
};

export const indent = (text: string, n = 4): string => text.split('\n').map((l) => ' '.repeat(n) + l).join('\n');

export const short = (commit: string | undefined): string => String(commit ?? '').slice(0, 12);

/** Bytes for people: 0 B, 12.3 KiB, 4.0 MiB ... ('-' when unknown). */
export function size(bytes: number | undefined): string {
  if (bytes === undefined) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let n = bytes;
  let i = 0;
  for (; n >= 1024 && i < units.length - 1; i++) n /= 1024;
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

export const findingLines = (r: { findings: Finding[] }): string =>
  r.findings.map((f) => `${f.path}${f.line ? `:${f.line}` : ''}: ${f.level} [${f.rule}] ${f.message}\n`).join('');

export const checkSummary = (what: string, r: { view: string; commit: string; ok: boolean; errors: number; warnings: number }): string =>
  `${what} ${r.view} (commit ${short(r.commit)}): ${r.ok ? 'ok' : 'FAILED'}, ${r.errors} error(s), ${r.warnings} warning(s)\n`;

/** A PR's state, why, how it merged, each check (with the output of those that failed) and each conflict. */
export const prState = (r: PullRequest): string =>
  `PR ${r.id} (${r.branch} -> ${r.target}): ${r.state}${r.reasons?.length ? ` (${r.reasons.join('; ')})` : ''}\n` +
  (r.merged ? `merged as ${r.merged.commit.slice(0, 12)} by ${r.merged.by}\n` : '') +
  r.checks.map((c) => `  check ${c.name}: ${c.ok ? 'pass' : 'FAIL'}${c.ok ? '' : `\n${indent(c.output)}`}\n`).join('') +
  (r.conflicts ?? []).map((c) => `  conflict ${c.kind} ${c.path}${c.keys ? `: ${c.keys.join(', ')}` : ''}\n` + (c.hunks ?? []).map((h) =>
    `    at line ${h.line}:\n${indent(h.base.map((l) => `base   | ${l}`).join('\n'), 6)}\n` +
    `${indent(h.main.map((l) => `main   | ${l}`).join('\n'), 6)}\n${indent(h.branch.map((l) => `branch | ${l}`).join('\n'), 6)}\n`).join('')).join('');

/** The folders a diff or PR adds or changes, a line each: `folder outbox/new/ added`, `folder d/ modified: mode 040755 -> 040700`. */
export const folderLines = (folders: ShownFolder[] | undefined): string =>
  (folders ?? []).map((f) => `folder ${f.path}/ ${f.status}${f.meta ? `: ${f.meta.map(metaText).join(', ')}` : ''}\n`).join('');
