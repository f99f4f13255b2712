import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The module map (docs/architecture.md, Development): library modules import downward only. A module may use its own
 * folder and any folder of a lower rank; an arrow to a folder of the same or a higher rank is a tangle.
 * metrics sits at the bottom beside util: every layer reports events to it, and it imports nothing of nasd's
 * (the scrape-time state comes from a sampler the daemon hands it, workflows/metrics-sample.ts).
 */
const RANK: Record<string, number> = {
  util: 0, store: 0, metrics: 0, config: 1, policy: 2, trash: 2, home: 3, cow: 4, memory: 4, lease: 4, run: 4,
  merge: 5, homes: 6, cluster: 6, 'fuse-ops': 7, api: 7, workflows: 8, daemon: 9, cli: 10,
  // The web page's browser files (served by nasd, no TypeScript): above everything, importing nothing.
  web: 11,
};
const SRC = path.resolve(import.meta.dirname, '../../src');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

const folderOf = (file: string) => path.relative(SRC, file).split(path.sep)[0];

describe('module layers', () => {
  it('knows the rank of every folder under src/', () => {
    const folders = fs.readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(folders.filter((f) => !(f in RANK))).toEqual([]);
  });

  it('keeps git out of the daemon: src/daemon imports nothing from src/store (the workflows and homes do)', () => {
    const bad = sources(path.join(SRC, 'daemon')).flatMap((file) =>
      [...fs.readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)]
        .filter((m) => folderOf(path.resolve(path.dirname(file), m[1])) === 'store')
        .map((m) => `${path.relative(SRC, file)} -> ${m[1]}`));
    expect(bad).toEqual([]);
  });

  it('keeps every source file at 450 lines or fewer', () => {
    const long = sources(SRC).map((f) => [path.relative(SRC, f), fs.readFileSync(f, 'utf8').split('\n').length - 1] as const).filter(([, n]) => n > 450);
    expect(long).toEqual([]);
  });

  it('has no import that runs up or sideways between folders', () => {
    const bad: string[] = [];
    for (const file of sources(SRC)) {
      const from = folderOf(file);
      for (const m of fs.readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
        const to = folderOf(path.resolve(path.dirname(file), m[1]));
        if (to === from || to.startsWith('..')) continue;
        if (RANK[to] > RANK[from] || (RANK[to] === RANK[from] && RANK[to] > 0)) bad.push(`${path.relative(SRC, file)} -> ${m[1]}`);
      }
    }
    expect(bad).toEqual([]);
  });
});
