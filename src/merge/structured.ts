import { isDeepStrictEqual } from 'node:util';
import yaml from 'js-yaml';
import { globToRegExp } from '../util/glob.js';
import type { MergeConfig, MergeDriver } from '../config/home-config.js';

/**
 * Structured data merges by its structure, not its lines: a JSON or YAML file changed on both main and a
 * branch is merged key by key (three-way), and stops where both sides changed one key differently. Files of
 * other structured formats with no registered driver are not merged line by line by policy: a person decides.
 */

/** Formats whose lines mean nothing on their own: merged only by a registered driver or a person. */
const STRUCTURED = /\.(json|ya?ml|toml|xml|plist|ipynb|ini)$/i;

/** The driver main's `.nas/merge.yaml` registers for a path (the first glob that matches), if any. */
export function driverFor(path: string, config: MergeConfig): MergeDriver | undefined {
  return config.drivers.find((d) => globToRegExp(d.path).test(path))?.driver;
}

/** Whether a file changed on both sides needs a person before it merges: a `person` rule, or structured data with no driver. */
export function needsPerson(path: string, config: MergeConfig): boolean {
  const driver = driverFor(path, config);
  return driver === 'person' || (driver === undefined && STRUCTURED.test(path));
}

export type StructuredMerge = { text: string; value: unknown } | { conflict: string[] };

/** A JSON or YAML document's data. */
export function parseStructured(driver: 'json' | 'yaml', text: string): unknown {
  return driver === 'json' ? JSON.parse(text) : yaml.load(text, { schema: yaml.CORE_SCHEMA });
}

/** Whether `text` holds exactly `value` (git's line merge kept the data the driver computed). */
export function holds(driver: 'json' | 'yaml', text: string, value: unknown): boolean {
  try {
    return equal(parseStructured(driver, text), value);
  } catch {
    return false;
  }
}

/**
 * Three-way merge of one JSON or YAML document. Keys keep main's order, then the branch's new keys; JSON keeps
 * main's indentation and final newline. YAML comments are not kept (the document is written anew), so the
 * merge keeps git's own line merge of the file instead whenever that merges cleanly to the same data. A side
 * that does not parse is a conflict naming that side.
 */
export function mergeStructured(driver: 'json' | 'yaml', base: string | null, main: string, branch: string): StructuredMerge {
  const sides: unknown[] = [];
  for (const [name, text] of [['the common ancestor', base], ['main', main], ['the branch', branch]] as const) {
    try {
      sides.push(text === null ? undefined : parseStructured(driver, text));
    } catch (err) {
      return { conflict: [`${name} is not valid ${driver.toUpperCase()} (${(err as Error).message.split('\n')[0]})`] };
    }
    const lossy = driver === 'json' && text !== null ? inexactNumber(text) : undefined;
    if (lossy) return { conflict: [`${name} holds the number ${lossy}, which the merge cannot keep exactly (JSON numbers are doubles here): a person merges it`] };
  }
  const conflicts: string[] = [];
  const merged = merge3(sides[0], sides[1], sides[2], [], conflicts);
  if (conflicts.length > 0) return { conflict: conflicts };
  // Where the data is one side's, that side's bytes as written.
  if (equal(merged, sides[1])) return { text: main, value: merged };
  if (equal(merged, sides[2])) return { text: branch, value: merged };
  if (driver === 'yaml') return { text: yaml.dump(merged, { lineWidth: -1, noRefs: true }), value: merged };
  return { text: writeJsonLike(main, merged), value: merged };
}

/** An integer beyond 2^53 (or -0) in JSON text, outside strings: parsing would change it. */
function inexactNumber(text: string): string | undefined {
  for (const m of text.matchAll(/"(?:[^"\\]|\\.)*"|(-?\d+)(?![.\deE])/g)) {
    if (m[1] !== undefined && (m[1] === '-0' || !Number.isSafeInteger(Number(m[1])))) return m[1];
  }
  return undefined;
}

/**
 * `value` as JSON written the way `like` is: on one line or indented as it is, with its spacing after colons and
 * commas (`{"a":1}` stays compact, `{ "a": 1 }` spaced), and its final newline.
 */
function writeJsonLike(like: string, value: unknown): string {
  const oneLine = !like.trim().includes('\n');
  const indent = oneLine ? '' : (/^([ \t]+)["}\]]/m.exec(like)?.[1] ?? '  ');
  const colon = /"\s*:( ?)/.exec(like)?.[1] === ' ' ? ': ' : ':';
  const comma = oneLine && /,\s/.test(like) ? ', ' : ',';
  const pad = (open: string) => (oneLine && new RegExp(`\\${open} `).test(like) ? ' ' : '');
  const write = (v: unknown, depth: number): string => {
    if (typeof v !== 'object' || v === null) return JSON.stringify(v);
    const items = Array.isArray(v) ? v.map((x) => write(x, depth + 1)) : Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}${colon}${write(x, depth + 1)}`);
    const [open, close] = Array.isArray(v) ? ['[', ']'] : ['{', '}'];
    if (items.length === 0) return open + close;
    if (oneLine) return `${open}${pad(open)}${items.join(comma)}${pad(open)}${close}`;
    const inner = indent.repeat(depth + 1);
    return `${open}\n${items.map((i) => inner + i).join(',\n')}\n${indent.repeat(depth)}${close}`;
  };
  return write(value, 0) + (like.endsWith('\n') ? '\n' : '');
}

type Plain = Record<string, unknown>;
const isPlain = (v: unknown): v is Plain => typeof v === 'object' && v !== null && !Array.isArray(v);

const equal = isDeepStrictEqual;

/** One value, three ways: the side that changed wins; both changed a mapping: key by key; else a conflict at `at`. */
function merge3(base: unknown, main: unknown, branch: unknown, at: string[], conflicts: string[]): unknown {
  if (equal(main, branch) || equal(base, branch)) return main;
  if (equal(base, main)) return branch;
  if (isPlain(main) && isPlain(branch) && (base === undefined || isPlain(base))) {
    const out: Plain = {};
    for (const key of new Set([...Object.keys(main), ...Object.keys(branch)])) {
      const value = merge3((base as Plain | undefined)?.[key], main[key], branch[key], [...at, key], conflicts);
      // Defined, not assigned: a key named __proto__ stays a key.
      if (value !== undefined) Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  conflicts.push(at.length === 0 ? '(the whole document)' : at.join('.'));
  return main;
}
