#!/usr/bin/env node
/**
 * Writes docs/cli.md, the reference of every `nas` command, from the built CLI's command table (dist/, so build
 * first: `npm run -s build && npm run -s docs`): each command's `doc` (src/cli/command.ts) and what
 * `nas --help` and `nas <word> --help` print. `--check` writes nothing and exits 1 when docs/cli.md differs
 * (test/docs/cli-reference.test.ts does the same), so the page cannot drift from the table.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const TARGET = path.join(ROOT, 'docs/cli.md');

/** A cell of a Markdown table: a pipe would end it. */
const cell = (s) => s.replace(/\|/g, '\\|');

/** The page, from the built command table; throws when a command's doc does not fit it. */
export async function render() {
  const { COMMANDS, HELP_WORDS, helpFor } = await import(path.join(ROOT, 'dist/src/cli/commands/index.js'));
  const { OVERVIEW } = await import(path.join(ROOT, 'dist/src/cli/overview.js'));
  const problems = [];
  for (const c of COMMANDS) {
    if (!c.doc.usage.startsWith(`nas ${c.name}`)) problems.push(`${c.name}: its usage does not start with "nas ${c.name}"`);
    for (const f of c.flags) if (!c.doc.usage.includes(`--${f}`)) problems.push(`${c.name}: its usage does not name --${f}`);
    if (!c.doc.about.trim()) problems.push(`${c.name}: no about`);
    if (!HELP_WORDS.includes(c.name.split(' ')[0])) problems.push(`${c.name}: no "nas ${c.name.split(' ')[0]} --help"`);
  }
  if (problems.length) throw new Error(`the command table's docs:\n  ${problems.join('\n  ')}`);

  const sections = HELP_WORDS.map((word) => ({ word, commands: COMMANDS.filter((c) => c.name.split(' ')[0] === word) }));
  const out = [
    '# The `nas` command reference',
    '',
    '<!-- Written by `npm run -s docs` (scripts/gen-cli-reference.mjs) from the command table in src/cli/commands:',
    '     change a command\'s `doc` or help there, not this file. test/docs/cli-reference.test.ts fails when they differ. -->',
    '',
    '`nas --help` lists every command; each takes `--json` (the daemon\'s answer as JSON), `--help` and `--socket PATH`.',
    'Exit status: 0 done, 1 failed (or a check found errors), 2 a usage mistake. How the pieces fit together is',
    '[the guide](guide.md); the first steps are [getting started](getting-started.md).',
    '',
    sections.map((s) => `[${s.word}](#${s.word})`).join(' · '),
    '',
  ];
  for (const { word, commands } of sections) {
    out.push(`## ${word}`, '', '| command | what it does |', '| --- | --- |');
    for (const c of commands) out.push(`| \`${cell(c.doc.usage)}\` | ${cell(c.doc.about)} |`);
    out.push('', `\`nas ${word} --help\`:`, '', '```text', helpFor(word).trimEnd(), '```', '');
  }
  out.push('## `nas --help`', '', '```text', OVERVIEW.trimEnd(), '```', '');
  return out.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const text = await render();
  if (process.argv.includes('--check')) {
    const now = fs.existsSync(TARGET) ? fs.readFileSync(TARGET, 'utf8') : '';
    if (now !== text) {
      process.stderr.write('docs/cli.md differs from the command table: run npm run -s build && npm run -s docs\n');
      process.exit(1);
    }
  } else {
    fs.writeFileSync(TARGET, text);
    process.stdout.write(`wrote ${path.relative(ROOT, TARGET)}\n`);
  }
}
