import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '../helpers.js';

/** The documentation: the README and every page under docs/, by path from the checkout's root. */
export async function pages(): Promise<Map<string, string>> {
  const files = ['README.md', ...(await fs.readdir(path.join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  return new Map(await Promise.all(files.map(async (f) => [f, await fs.readFile(path.join(ROOT, f), 'utf8')] as const)));
}

/** A fenced block: its info string (`bash`, `console`), its text, and the heading it is under. */
export interface Fence {
  lang: string;
  text: string;
  heading: string;
}

export function fences(markdown: string): Fence[] {
  const out: Fence[] = [];
  let heading = '';
  let open: Fence | null = null;
  for (const line of markdown.split('\n')) {
    if (open) {
      if (line.startsWith('```')) {
        out.push(open);
        open = null;
      } else open.text += `${line}\n`;
    } else if (line.startsWith('```')) open = { lang: line.slice(3).trim(), text: '', heading };
    else if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
  }
  return out;
}

/** A `console` block's steps: each `$ command` line and the lines it prints, up to the next one. */
export function steps(console: string): { command: string; expected: string[] }[] {
  const out: { command: string; expected: string[] }[] = [];
  for (const line of console.replace(/\n$/, '').split('\n')) {
    if (line.startsWith('$ ')) out.push({ command: line.slice(2), expected: [] });
    else if (out.length) out.at(-1)!.expected.push(line);
    else throw new Error(`output before any command: ${line}`);
  }
  return out;
}

/** The printed lines as a pattern: each line whole, `...` standing for any text within a line. */
export function printedPattern(expected: string[]): RegExp {
  const line = (l: string) => l.split('...').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*');
  return new RegExp(`^${expected.map(line).join('\n')}$`);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
export function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
}
