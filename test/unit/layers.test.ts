import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

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
const NATIVE = path.resolve(import.meta.dirname, '../../native');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

const folderOf = (file: string) => path.relative(SRC, file).split(path.sep)[0];

/** The binding's own C++: native/*.cc and *.h, and its unit tests (native/test/). */
function nativeSources(): string[] {
  return [NATIVE, path.join(NATIVE, 'test')].flatMap((dir) =>
    fs.readdirSync(dir).filter((f) => /\.(cc|h)$/.test(f)).map((f) => path.join(dir, f)));
}

/** C++ with its comments, strings and character literals blanked (lines kept): their braces are not code. */
function codeOnly(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'/g, (m) => m.replace(/[^\n]/g, ' '));
}

/**
 * The functions a C++ file defines, by a brace-depth scan: one starts at a line at depth 0 that ends with `{`, and
 * ends where the depth is 0 again. The body of a namespace, class, struct, union or enum counts as depth 0 (a
 * method defined in a class is a function like any other). Named by the identifier before its `(`, on the line
 * or, for a signature broken over lines, the one before.
 */
function cppFunctions(text: string): { name: string; lines: number }[] {
  const source = text.split('\n');
  const found: { name: string; lines: number }[] = [];
  let depth = 0;
  let start = -1;
  codeOnly(text).split('\n').forEach((line, i) => {
    const scope = /^\s*(namespace|extern|class|struct|union|enum)\b[^(]*$/.test(line);
    if (depth === 0 && /\{\s*$/.test(line) && !scope) start = i;
    for (const ch of line) {
      if (ch === '{' && (depth > 0 || start === i)) depth++;
      if (ch !== '}' || depth === 0) continue;
      if (--depth === 0 && start >= 0) {
        const head = /(\w+)\s*\(/.exec(source[start]) ?? (/\)/.test(source[start]) ? /(\w+)\s*\(/.exec(source[start - 1] ?? '') : null);
        found.push({ name: head ? head[1] : source[start].trim(), lines: i - start + 1 });
        start = -1;
      }
    }
  });
  return found;
}

/** The functions a TS file defines (every function-like node with a body, nested ones too), with their line counts. */
function tsFunctions(file: string): { name: string; lines: number }[] {
  const sf = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: { name: string; lines: number }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.end).line;
      found.push({ name: `${node.name?.getText(sf) ?? 'function'} at ${first + 1}`, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

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

  it('keeps the binding\'s C++ files at 450 lines or fewer', () => {
    const long = nativeSources().map((f) => [path.relative(NATIVE, f), fs.readFileSync(f, 'utf8').split('\n').length - 1] as const).filter(([, n]) => n > 450);
    expect(long).toEqual([]);
  });

  it('scans C++ as it should: methods in a class, signatures over two lines, braces in comments and strings', () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  x += ${i};`).join('\n');
    const text = [
      'namespace nas {', 'struct Mount {', '  int size() const {', body(3), '  }', '};',
      'static const char* open = "{"; // {', 'static void handler(int a,', '                    int b) {', "  char c = '}';", body(90), '}',
      'struct stat* attrs(int x) {', body(2), '}', '}  // namespace nas',
    ].join('\n');
    expect(cppFunctions(text)).toEqual([{ name: 'size', lines: 5 }, { name: 'handler', lines: 93 }, { name: 'attrs', lines: 4 }]);
  });

  it('keeps every C++ function at 80 lines or fewer', () => {
    const long = nativeSources().flatMap((f) =>
      cppFunctions(fs.readFileSync(f, 'utf8')).filter((fn) => fn.lines > 80).map((fn) => `${path.relative(NATIVE, f)} ${fn.name}`));
    expect(long).toEqual([]);
  });

  it('keeps every TS function at 80 lines or fewer', () => {
    const long = sources(SRC).flatMap((f) => tsFunctions(f).filter((fn) => fn.lines > 80).map((fn) => `${path.relative(SRC, f)} ${fn.name}: ${fn.lines}`));
    expect(long).toEqual([]);
    // The scan sees functions at all (an arrow, a method, a nested one).
    expect(tsFunctions(path.join(SRC, 'fuse-ops/adapter.ts')).length).toBeGreaterThan(20);
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
