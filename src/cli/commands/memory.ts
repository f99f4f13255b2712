import fs from 'node:fs/promises';
import { isIndexWrite } from '../../api/types.js';
import { Usage, splitTarget, type Args } from '../args.js';
import { command } from '../command.js';
import { checkSummary, findingLines, short, table } from '../format.js';
import type { Measured } from '../../memory/context.js';

export const help = {
  memory:
    'usage: nas memory check <role>[@<branch>]\n' +
    '       nas memory index <role>@<branch> [--check]\n' +
    '       nas memory measure <role>[@<branch>] [--task memory/notes/x.md]...\n' +
    '       nas memory review <role> <note> [--description TEXT]\n' +
    '       nas memory import <role>@<branch> <file>...\n' +
    '       nas memory share <role> <note> --to <shared-home>\n\n' +
    'check   runs every memory rule (front matter, trust labels, MEMORY.md token cap, resident byte budgets,\n' +
    '        topic indexes) and prints each problem with file and line; exit 0 when none is an error.\n' +
    '        On a branch, a note that says "trust: reviewed" but changed in the branch is an error.\n' +
    'index   rewrites the text between <!-- nas:index:start --> and <!-- nas:index:end --> in every index file\n' +
    '        of the branch and commits it; text outside the markers is kept. --check writes nothing.\n' +
    'measure prints exact bytes and tokens: start set, start + index + each --task topic, full load.\n' +
    'review  (owner) sets "trust: reviewed", moves a quarantined note into memory/notes/, regenerates the\n' +
    '        indexes, and commits that on main. Refused when it would break a budget.\n' +
    'import  copies local files (CLAUDE.md, Cursor .mdc rules, Markdown, text) into memory/quarantine/ of the\n' +
    '        branch as unreviewed notes with description, updated and source filled in; content is kept as is.\n' +
    'share   (owner) proposes a copy of a reviewed note of <role>\'s main to <shared-home> as a PR there (into its\n' +
    '        memory/quarantine/from-<role>/, unreviewed, with its source). Once merged and reviewed by that Home\'s\n' +
    '        owner, it is in the index every Home with "shared: [<shared-home>]" in .nas/role.yaml reads on demand.\n' +
    'A MEMORY.md or INDEX.md without the index markers keeps single-file memory: nothing is generated into it.\n',
};

/** `<role>[@<branch>]`, the argument after `memory <verb>`. */
const target = (args: Args) => {
  const [role, branch] = splitTarget(args.need(2, '<role>[@<branch>]'));
  return { params: { role }, branch };
};

async function readLocal(file: string): Promise<Buffer> {
  try {
    return await fs.readFile(file);
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
}

const measuredRow = (name: string, m: Measured) => [name, String(m.files.length), String(m.bytes), String(m.tokens)];

export const commands = [
  command({
    name: 'memory check',
    doc: {
      usage: 'nas memory check <role>[@<branch>]',
      about: 'every [memory rule](guide.md#memory); each problem with file, line and rule; exit 1 on any error',
    },
    route: 'memoryCheck',
    request: (args) => {
      const { params, branch } = target(args);
      return { params, body: { branch } };
    },
    print: (r) =>
      checkSummary('memory check', r) + findingLines(r) +
      r.startSet.map((f) => `start set: ${f.path} ${f.bytes} B of ${f.budget} B, ${f.tokens} tokens\n`).join('') +
      r.singleFile.map((p) => `${p}: single-file memory (no index markers; add them to turn the index on)\n`).join('') +
      (r.memoryTokens ? `memory/MEMORY.md: ${r.memoryTokens.tokens} of ${r.memoryTokens.cap} tokens\n` : ''),
    failed: (r) => !r.ok,
  }),
  command({
    name: 'memory index',
    doc: {
      usage: 'nas memory index <role>@<branch> [--check]',
      about: 'regenerate every topic index block in the branch and commit it; `--check` writes nothing and exits 1 ' +
        'when stale',
    },
    route: 'memoryIndex',
    flags: ['check'],
    request: (args) => {
      const { params, branch } = target(args);
      return { params, body: { branch, check: args.has('check') } };
    },
    print: (r) =>
      !isIndexWrite(r)
        ? checkSummary('index check', r) + findingLines(r)
        : (r.written.length === 0 ? `indexes up to date in ${r.view}: ${r.indexes.join(', ') || 'none (no file has the index markers: single-file memory)'}\n`
          : r.written.map((p) => `regenerated ${r.view}/${p}\n`).join('') + `committed: ${short(r.head)}\n`) +
          r.problems.map((p) => `${p.path}:${p.line}: error [index-markers] ${p.message} (not rewritten)\n`).join(''),
    failed: (r) => !r.ok,
  }),
  command({
    name: 'memory measure',
    doc: {
      usage: 'nas memory measure <role>[@<branch>] [--task PATH]...',
      about: 'exact bytes and o200k_base tokens: start set, start + index + task topic, full load',
    },
    route: 'memoryMeasure',
    flags: ['task'],
    request: (args) => {
      const { params, branch } = target(args);
      return { params, body: { branch, tasks: args.list('task') } };
    },
    print: (r) =>
      table([
        ['SET', 'FILES', 'BYTES', 'TOKENS'],
        measuredRow('start', r.start),
        ...(r.task ? [measuredRow('start + index + task', r.task)] : []),
        measuredRow('full load', r.full),
        ['whole memory', String(r.whole.files), String(r.whole.bytes), '-'],
      ]) + '\n' + table([['FILE', 'BYTES', 'TOKENS'], ...(r.task ?? r.start).files.map((f) => [f.path, String(f.bytes), String(f.tokens)])]),
  }),
  command({
    name: 'memory review',
    doc: {
      usage: 'nas memory review <role> <note> [--description TEXT]',
      about: 'owner: label a note `reviewed` (moving it out of quarantine) on main, indexes regenerated in the same ' +
        'commit, merged into main as any change is (a one-commit branch, the owner as approver)',
    },
    route: 'memoryReview',
    flags: ['description'],
    request: (args) => {
      const role = args.need(2, '<role>');
      if (role.includes('@')) throw new Usage('reviews land on main: name the Home only');
      return { params: { role }, body: { path: args.need(3, '<note>'), description: args.value('description') } };
    },
    print: (r) =>
      `reviewed ${r.reviewed}${r.to !== r.reviewed ? ` -> ${r.to}` : ''} on main (commit ${short(r.commit)})\n` +
      r.regenerated.map((p) => `regenerated ${p}\n`).join(''),
  }),
  command({
    name: 'memory share',
    doc: {
      usage: 'nas memory share <role> <note> --to <shared-home>',
      about: 'owner: propose a copy of a reviewed note of `<role>`\'s main to a [shared memory Home](guide.md#shared-memory), ' +
        'as a PR there (into its quarantine, for its owner\'s review); a note that is not reviewed is refused',
    },
    route: 'memoryShare',
    flags: ['to'],
    request: (args) => {
      const role = args.need(2, '<role>');
      if (role.includes('@')) throw new Usage('a note is shared from main: name the Home only');
      const to = args.value('to');
      if (!to) throw new Usage('name the shared Home: --to <shared-home>');
      return { params: { role }, body: { path: args.need(3, '<note>'), to } };
    },
    print: (r) =>
      `proposed ${r.from}'s ${r.note} to ${r.to} as ${r.path}: PR ${r.pr} (${r.prState}) from ${r.to}/${r.branch}\n` +
      `once it merges, ${r.to}'s owner reviews it into ${r.to}'s index: nas memory review ${r.to} ${r.path}\n`,
  }),
  command({
    name: 'memory import',
    doc: {
      usage: 'nas memory import <role>@<branch> <file>...',
      about: 'bring a CLAUDE.md, Cursor `.mdc` rules, Markdown or text into `memory/quarantine/`, unreviewed',
    },
    route: 'memoryImport',
    request: async (args) => {
      const { params, branch } = target(args);
      const names = args.positional.slice(3);
      if (names.length === 0) throw new Usage('name the files to import');
      const files = await Promise.all(names.map(async (name) => ({ name, content: (await readLocal(name)).toString('base64') })));
      return { params, body: { branch, files } };
    },
    print: (r) =>
      r.imported.map((i) => `imported ${i.from} -> ${r.view}/${i.to} (unreviewed)\n`).join('') +
      r.refused.map((i) => `refused ${i.from}: ${i.reason}\n`).join(''),
    failed: (r) => !r.ok,
  }),
];
