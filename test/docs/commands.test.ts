import { describe, expect, it } from 'vitest';
import { parse } from '../../src/cli/args.js';
import { lookup } from '../../src/cli/commands/index.js';
import { fences, pages } from './pages.js';

/**
 * Every `nas` command line the README and docs/ show (in bash and console blocks, and in inline code) names a
 * command the CLI has and only options that command takes, so a page cannot keep showing a command after it was
 * renamed or lost an option. getting-started.test.ts runs that page's commands for real.
 */
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

/** The `nas ...` invocations in a line of shell: each up to a comment, `;`, `&&`, `|` or `)`. */
export function invocations(line: string): string[][] {
  const found: string[][] = [];
  const code = line.replace(/(^|\s)#.*$/, '');
  for (const part of code.split(/;|&&|\|\||\||\$\(|\)/)) {
    const w = words(part.trim());
    const at = w.findIndex((x, i) => x === 'nas' && w.slice(0, i).every((p) => p === 'sudo' || p === '$' || /^[A-Z_]+=/.test(p)));
    if (at >= 0) found.push(w.slice(at + 1));
  }
  return found;
}

describe('the nas commands the pages show', () => {
  it('each names a command nas has, with options it takes', async () => {
    const bad: string[] = [];
    let checked = 0;
    for (const [file, text] of await pages()) {
      if (file === 'docs/cli.md') continue; // written from the command table itself
      // A console block's commands are its `$ ` lines (the rest is what they print).
      const lines = fences(text).flatMap((f) => f.lang === 'console'
        ? f.text.split('\n').filter((l) => l.startsWith('$ ')).map((l) => l.slice(2))
        : ['bash', 'sh'].includes(f.lang) ? f.text.split('\n') : []);
      const inline = [...text.replace(/^```[\s\S]*?^```/gm, '').matchAll(/`(nas [^`]+)`/g)].map((m) => m[1]!);
      for (const line of [...lines, ...inline]) {
        for (const argv of invocations(line)) {
          checked++;
          const shown = `nas ${argv.join(' ')}`;
          try {
            const args = parse(argv.filter((a) => a !== '...'), '/nonexistent.sock');
            if (args.help || args.version) continue;
            const cmd = lookup(args.positional);
            if (!cmd) bad.push(`${file}: ${shown}: no such command`);
            else for (const f of args.given()) if (!cmd.flags.includes(f)) bad.push(`${file}: ${shown}: ${cmd.name} takes no --${f}`);
          } catch (err) {
            bad.push(`${file}: ${shown}: ${(err as Error).message}`);
          }
        }
      }
    }
    expect(bad).toEqual([]);
    expect(checked).toBeGreaterThan(50);
  });
});
