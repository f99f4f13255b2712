import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '../helpers.js';
import { fences, pages, slug } from './pages.js';

/**
 * The README and docs/: the README opens with the two commands (.ci/run runs the second), and every link
 * between the pages is relative and lands on a file that exists and, with an anchor, on one of its headings.
 */
describe('the README and docs/', () => {
  it('the README opens with the two commands for a fresh Debian machine, and .ci/run runs the test one', async () => {
    const readme = (await pages()).get('README.md')!;
    const first = fences(readme)[0]!;
    expect(readme.indexOf('```')).toBeLessThan(200);
    const commands = first.text.split('\n').filter(Boolean).map((l) => l.replace(/\s+#.*$/, ''));
    expect(commands).toEqual(['scripts/mount.sh --demo', 'scripts/test.sh']);
    for (const script of ['scripts/mount.sh', 'scripts/test.sh']) await fs.access(path.join(ROOT, script), fs.constants.X_OK);
    expect(await fs.readFile(path.join(ROOT, '.ci/run'), 'utf8')).toMatch(/^bash scripts\/test\.sh$/m);
  });

  it('every relative link lands on a file, and every anchor on a heading of it', async () => {
    const all = await pages();
    const anchors = new Map([...all].map(([f, text]) => [f, new Set(text.split('\n').filter((l) => /^#{1,6} /.test(l)).map((l) => slug(l.replace(/^#+ /, ''))))]));
    const bad: string[] = [];
    for (const [file, text] of all) {
      // Links outside code: fenced blocks and inline code are dropped first.
      const prose = text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
      for (const [, target] of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        if (target!.startsWith('/')) bad.push(`${file}: ${target} is not relative`);
        const [rel, anchor] = target!.split('#');
        const to = rel ? path.normalize(path.join(path.dirname(file), rel)) : file;
        try {
          await fs.access(path.join(ROOT, to));
        } catch {
          bad.push(`${file}: ${target} (no ${to})`);
          continue;
        }
        if (anchor && !anchors.get(to)?.has(anchor)) bad.push(`${file}: ${target} (no heading #${anchor} in ${to})`);
      }
    }
    expect(bad).toEqual([]);
  });
});
