import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT, run } from '../helpers.js';
import { COMMANDS } from '../../src/cli/commands/index.js';

/**
 * docs/cli.md is written by scripts/gen-cli-reference.mjs from the built command table (each command's doc, and
 * what `nas --help` and `nas <word> --help` print): it must be what the generator writes now, so a command added,
 * renamed or given an option without its page changing fails here.
 */
describe('the CLI reference (docs/cli.md)', () => {
  it('is what scripts/gen-cli-reference.mjs writes from the command table', async () => {
    const { render } = (await import(path.join(ROOT, 'scripts/gen-cli-reference.mjs'))) as { render(): Promise<string> };
    const page = await fs.readFile(path.join(ROOT, 'docs/cli.md'), 'utf8');
    // On a difference: npm run -s build && npm run -s docs, and commit docs/cli.md.
    expect(page).toBe(await render());
  });

  it('has a row for every command, naming every option it takes', async () => {
    const page = await fs.readFile(path.join(ROOT, 'docs/cli.md'), 'utf8');
    for (const c of COMMANDS) {
      const row = page.split('\n').find((l) => l.startsWith(`| \`nas ${c.name}`) && l.includes(c.doc.about.replace(/\|/g, '\\|')));
      expect(row, c.name).toBeDefined();
      for (const f of c.flags) expect(row, `${c.name} --${f}`).toContain(`--${f}`);
    }
  });

  it('the check mode of the generator agrees (what a contributor runs)', async () => {
    const r = await run(process.execPath, [path.join(ROOT, 'scripts/gen-cli-reference.mjs'), '--check'], { cwd: ROOT });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
});
