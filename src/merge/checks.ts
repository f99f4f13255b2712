import yaml from 'js-yaml';
import { BUILTIN_CHECKS, parseLimits, parseMaintenance, parsePolicy, parseRole, type LimitsConfig } from '../config/home-config.js';
import { MODE, type Change, type Store } from '../store/store.js';
import { parseDuration } from '../util/duration.js';
import { checkMemory } from '../memory/check.js';
import { relativeLinks } from '../memory/links.js';
import type { Memory } from '../memory/model.js';
import { JOURNAL_DIR } from '../memory/layout.js';
import type { CheckDirs } from './check-sandbox.js';

/**
 * The checks an Agent PR runs. Their definitions come from the target's (main's) `.nas/`, never from the
 * branch being proposed, so a run cannot weaken its own checks. Built in: links, schema, memory, journal;
 * more in main's `.nas/checks.yaml` as executables with a time limit.
 */

export interface CheckResult {
  name: string;
  ok: boolean;
  /** What the check found (kept with the PR). */
  output: string;
  ms: number;
}

export interface Proposal {
  store: Store;
  /** Trees: the proposed head, the fork point, and main now. */
  head: string;
  base: string;
  main: string;
  changes: Change[];
  /** The head's memory, read against main's reviewed notes. */
  memory: Memory;
  limits: LimitsConfig;
  /** Where custom checks get their directories. */
  checkDirs: CheckDirs;
}

export interface CustomCheck {
  name: string;
  /** Path of the executable in main's tree. */
  run: string;
  timeoutMs: number;
}

const OUTPUT_MAX = 64 * 1024;
const text = async (store: Store, oid: string) => (await store.readBlob(oid)).toString('utf8');
const changed = (p: Proposal) => p.changes.filter((c) => c.after);

async function links(p: Proposal): Promise<string[]> {
  const problems: string[] = [];
  for (const c of changed(p).filter((c) => c.path.toLowerCase().endsWith('.md') && c.after!.mode !== MODE.link)) {
    for (const link of relativeLinks(c.path, await text(p.store, c.after!.oid))) {
      if (link.path.startsWith('../') || link.path === '..' || !(await p.store.lookupPath(p.head, link.path))) {
        problems.push(`${c.path}:${link.line}: link to ${link.target} does not resolve`);
      }
    }
  }
  return problems;
}

async function schema(p: Proposal): Promise<string[]> {
  const paths = new Set(changed(p).map((c) => c.path));
  const problems = checkMemory(p.memory, p.limits).findings
    .filter((f) => paths.has(f.path) && ['front-matter', 'skill-front-matter', 'binary'].includes(f.rule))
    .map((f) => `${f.path}${f.line ? `:${f.line}` : ''}: ${f.message}`);
  const parsers: Record<string, (t: string) => { problems: string[] }> = {
    '.nas/role.yaml': parseRole, '.nas/limits.yaml': parseLimits, '.nas/maintenance.yaml': parseMaintenance, '.nas/policy.yaml': parsePolicy,
  };
  for (const c of changed(p)) {
    const parse = parsers[c.path];
    if (parse) problems.push(...parse(await text(p.store, c.after!.oid)).problems);
  }
  return problems;
}

function memory(p: Proposal): string[] {
  return checkMemory(p.memory, p.limits).findings
    .filter((f) => f.level === 'error')
    .map((f) => `${f.path}${f.line ? `:${f.line}` : ''}: [${f.rule}] ${f.message}`);
}

async function journal(p: Proposal): Promise<string[]> {
  const problems: string[] = [];
  for (const c of p.changes.filter((c) => c.path.startsWith(JOURNAL_DIR))) {
    if (c.status === 'deleted') problems.push(`${c.path}: deleted; journal files only grow`);
    if (c.status !== 'modified') continue;
    const [before, after] = await Promise.all([p.store.readBlob(c.before!.oid), p.store.readBlob(c.after!.oid)]);
    if (after.length < before.length || !after.subarray(0, before.length).equals(before)) {
      problems.push(`${c.path}: changed before its end (${before.length} bytes were there); journal files only grow by appending`);
    }
  }
  return problems;
}

const BUILTIN: Record<string, (p: Proposal) => Promise<string[]> | string[]> = { links, schema, memory, journal };

/** Custom checks from main's `.nas/checks.yaml`; a file that does not parse yields a check that fails and says why. */
export function parseCheckDefinitions(source: string | null): { checks: CustomCheck[]; problems: string[] } {
  if (source === null) return { checks: [], problems: [] };
  const problems: string[] = [];
  const checks: CustomCheck[] = [];
  try {
    const doc = yaml.load(source, { schema: yaml.CORE_SCHEMA }) as { checks?: unknown } | null;
    const list = doc?.checks ?? [];
    if (!Array.isArray(list)) throw new Error('"checks" must be a list of {name, run, timeout}');
    for (const [i, c] of list.entries()) {
      const { name, run, timeout } = (c ?? {}) as Record<string, unknown>;
      if (typeof name !== 'string' || !/^[a-z0-9][a-z0-9_-]*$/.test(name) || BUILTIN_CHECKS.includes(name)) {
        problems.push(`.nas/checks.yaml: entry ${i + 1}: name must be a new lower-case name (not ${BUILTIN_CHECKS.join(', ')})`);
      } else if (typeof run !== 'string' || run.includes('..')) {
        problems.push(`.nas/checks.yaml: ${name}: run must be a path in the Home, e.g. .nas/checks/${name}.sh`);
      } else {
        checks.push({ name, run, timeoutMs: parseDuration(String(timeout ?? '30s')) * 1000 });
      }
    }
  } catch (err) {
    const e = err as { mark?: { line: number }; reason?: string; message: string };
    problems.push(`.nas/checks.yaml: ${e.mark ? `line ${e.mark.line + 1}: ` : ''}${e.reason ?? e.message}`);
  }
  return { checks, problems };
}

/**
 * Run an executable taken from main's tree, with the proposed content of every changed file under its path in
 * a directory of the check's own (the working directory), and the list of changes in $NAS_CHANGES (check-sandbox.ts).
 */
async function runCustom(p: Proposal, check: CustomCheck): Promise<{ ok: boolean; output: string }> {
  const script = await p.store.lookupPath(p.main, check.run);
  if (!script || script.mode === MODE.tree) return { ok: false, output: `${check.run} does not exist in main` };
  const unreachable = await p.checkDirs.unreachable();
  if (unreachable) return { ok: false, output: unreachable };
  const dir = await p.checkDirs.create();
  try {
    await dir.writeExecutable(await p.store.readBlob(script.oid));
    for (const c of changed(p).filter((c) => c.after!.mode !== MODE.link)) {
      await dir.writeFile(c.path, await p.store.readBlob(c.after!.oid), c.after!.mode === MODE.exec);
    }
    await dir.writeChanges(p.changes.map((c) => `${c.status}\t${c.path}\n`).join(''));
    const { code, output, killed, error } = await dir.run(check.timeoutMs, OUTPUT_MAX);
    if (error) return { ok: false, output: `cannot run ${check.run}: ${error}` };
    const note = killed ? `\n(killed after its time limit of ${check.timeoutMs} ms)` : '';
    return { ok: !killed && code === 0, output: ((output || `exit ${code}`) + note).slice(0, OUTPUT_MAX) };
  } finally {
    await dir.remove();
  }
}

/**
 * Custom checks run one at a time, whatever Home proposes: they all run as one account (check-sandbox.ts), which
 * could reach a running check's files (its /proc entries) or signal it, and a check often runs the PR's own code.
 */
let running: Promise<unknown> = Promise.resolve();
function oneAtATime<T>(check: () => Promise<T>): Promise<T> {
  const turn = running.then(check, check);
  running = turn.catch(() => undefined);
  return turn;
}

/** Run the named checks; unknown names are refused before anything runs. */
export async function runChecks(p: Proposal, names: string[], custom: CustomCheck[], definitionProblems: string[]): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  if (definitionProblems.length > 0) results.push({ name: 'checks.yaml', ok: false, output: definitionProblems.join('\n'), ms: 0 });
  for (const name of names) {
    const started = Date.now();
    const def = custom.find((c) => c.name === name);
    if (def) {
      const { ok, output } = await oneAtATime(() => runCustom(p, def));
      results.push({ name, ok, output, ms: Date.now() - started });
      continue;
    }
    const problems = await BUILTIN[name](p);
    results.push({ name, ok: problems.length === 0, output: problems.join('\n') || 'ok', ms: Date.now() - started });
  }
  return results;
}

export function knownChecks(custom: CustomCheck[]): string[] {
  return [...BUILTIN_CHECKS, ...custom.map((c) => c.name)];
}
