/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for tests: every line is a
 * `# HELP`, a `# TYPE` or a sample of a family declared before it; names and label names are valid; label values
 * are escaped; histograms have ascending `le` buckets ending in +Inf, cumulative, with +Inf equal to _count.
 * Throws on the first problem, naming the line.
 */

export interface Family {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  help: string;
}

export interface Exposition {
  families: Map<string, Family>;
  /** `name{a="x",b="y"}` (labels sorted by name) -> value. */
  samples: Map<string, number>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const SUFFIXES: Record<string, string[]> = { histogram: ['_bucket', '_sum', '_count'], summary: ['', '_sum', '_count'] };

export const key = (name: string, labels: Record<string, string> = {}): string => {
  const parts = Object.keys(labels).sort().map((k) => `${k}=${JSON.stringify(labels[k])}`);
  return parts.length ? `${name}{${parts.join(',')}}` : name;
};

function parseLabels(text: string, where: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new Error(`${where}: a label without "="`);
    const name = text.slice(i, eq).trim();
    if (!LABEL.test(name) || name.startsWith('__')) throw new Error(`${where}: bad label name "${name}"`);
    if (name in labels) throw new Error(`${where}: label ${name} twice`);
    if (text[eq + 1] !== '"') throw new Error(`${where}: label ${name}'s value is not quoted`);
    let value = '';
    let j = eq + 2;
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') {
        const next = text[++j];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`${where}: bad escape \\${next} in label ${name}`);
      } else if (text[j] === '\n') throw new Error(`${where}: newline in label ${name}`);
      else value += text[j];
    }
    if (text[j] !== '"') throw new Error(`${where}: label ${name}'s value is not closed`);
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i++;
    else if (i < text.length) throw new Error(`${where}: expected "," after label ${name}`);
  }
  return labels;
}

function parseValue(text: string, where: string): number {
  // As Go's ParseFloat reads it (Prometheus does): NaN and Inf in any case (prom-client writes "Nan").
  if (/^\+?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`${where}: bad value "${text}"`);
  return Number(text);
}

export function parseExposition(body: string): Exposition {
  const families = new Map<string, Family>();
  const samples = new Map<string, number>();
  const buckets = new Map<string, [number, number][]>();
  if (!body.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  for (const [n, line] of body.slice(0, -1).split('\n').entries()) {
    const where = `line ${n + 1} (${line.slice(0, 80)})`;
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (meta) {
      const [, kind, name, rest] = meta;
      if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
      const f = families.get(name) ?? { name, type: 'untyped', help: '' };
      if (kind === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest)) throw new Error(`${where}: unknown type`);
        if (samples.size && [...samples.keys()].some((k) => k.startsWith(`${name}{`) || k === name)) throw new Error(`${where}: TYPE after samples`);
        f.type = rest as Family['type'];
      } else f.help = rest;
      families.set(name, f);
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$/.exec(line);
    if (!m) throw new Error(`${where}: not a sample line`);
    const [, name, labelText, valueText] = m;
    const labels = parseLabels(labelText ?? '', where);
    const value = parseValue(valueText, where);
    const family = [...families.values()].find((f) => (SUFFIXES[f.type] ?? ['']).some((s) => `${f.name}${s}` === name));
    if (!family) throw new Error(`${where}: a sample of no declared family`);
    const k = key(name, labels);
    if (samples.has(k)) throw new Error(`${where}: the same series twice`);
    samples.set(k, value);
    if (family.type === 'counter' && !(value >= 0)) throw new Error(`${where}: a counter below 0`);
    if (name.endsWith('_bucket') && family.type === 'histogram') {
      if (!('le' in labels)) throw new Error(`${where}: a bucket without le`);
      const { le, ...rest } = labels;
      const series = key(family.name, rest);
      buckets.set(series, [...(buckets.get(series) ?? []), [parseValue(le, where), value]]);
    }
  }
  for (const [series, list] of buckets) {
    for (let i = 1; i < list.length; i++) {
      if (!(list[i][0] > list[i - 1][0])) throw new Error(`${series}: buckets not ascending`);
      if (list[i][1] < list[i - 1][1]) throw new Error(`${series}: buckets not cumulative`);
    }
    if (list.at(-1)![0] !== Infinity) throw new Error(`${series}: no +Inf bucket`);
    const name = series.replace(/\{.*$/, '');
    const count = samples.get(series.replace(name, `${name}_count`));
    if (count !== list.at(-1)![1]) throw new Error(`${series}: +Inf bucket ${list.at(-1)![1]} is not _count ${count}`);
  }
  return { families, samples };
}

/** The sum of every series of `name` whose labels include `match`. */
export function total(e: Exposition, name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const [k, v] of e.samples) {
    const m = /^([^{]+)(?:\{(.*)\})?$/.exec(k)!;
    if (m[1] !== name) continue;
    const labels = parseLabels(m[2] ?? '', k);
    if (Object.entries(match).every(([l, want]) => labels[l] === want)) sum += v;
  }
  return sum;
}
