import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { BUILTIN_CHECKS, parseLimits, parseMaintenance, parsePolicy, parseRole, type LimitsConfig } from '../config/home-config.js';
import { MODE, type Change, type Store } from '../store/store.js';
import { parseDuration } from '../util/duration.js';
import { checkMemory } from '../memory/check.js';
import { relativeLinks } from '../memory/links.js';
import type { Memory } from '../memory/model.js';
import { JOURNAL_DIR } from '../memory/layout.js';
import { mkdirExact, writeFileExact } from '../util/exact-mode.js';

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
}

export interface CustomCheck {
  name: string;
  /** Path of the executable in main's tree. */
  run: string;
  timeoutMs: number;
}

const OUTPUT_MAX = 64 * 1024;
/** Custom checks run as nobody: main's .nas/ is the owner's, but its scripts need no privilege. */
const NOBODY = 65534;
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
 * Run an executable taken from main's tree, with the proposed content of every changed file under its
 * path in a temporary directory (the working directory), and the list of changes in $NAS_CHANGES.
 */
async function runCustom(p: Proposal, check: CustomCheck): Promise<{ ok: boolean; output: string }> {
  const script = await p.store.lookupPath(p.main, check.run);
  if (!script || script.mode === MODE.tree) return { ok: false, output: `${check.run} does not exist in main` };
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-check-'));
  try {
    const exe = `${dir}/.check`;
    // The check runs as nobody: what it reads gets explicit modes (nasd's umask would keep it root's alone).
    await writeFileExact(exe, await p.store.readBlob(script.oid), 0o755);
    const work = `${dir}/tree`;
    await mkdirExact(work, 0o755);
    for (const c of changed(p).filter((c) => c.after!.mode !== MODE.link)) {
      await mkdirExact(path.dirname(`${work}/${c.path}`), 0o755);
      await writeFileExact(`${work}/${c.path}`, await p.store.readBlob(c.after!.oid), 0o644);
    }
    await writeFileExact(`${dir}/changes`, p.changes.map((c) => `${c.status}\t${c.path}\n`).join(''), 0o644);
    await fs.chmod(dir, 0o755);
    return await new Promise((resolve) => {
      // As nobody, in its own process group: the time limit, and the end of the check, kill all it started.
      const child = spawn(exe, [], {
        cwd: work, env: { PATH: process.env.PATH, HOME: work, NAS_CHANGES: `${dir}/changes` },
        stdio: ['ignore', 'pipe', 'pipe'], detached: true, uid: NOBODY, gid: NOBODY,
      });
      let output = '';
      let killed = false;
      let done = false;
      const killGroup = () => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      };
      const finish = (ok: boolean, text: string) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        killGroup();
        child.stdout.destroy();
        child.stderr.destroy();
        resolve({ ok, output: text.slice(0, OUTPUT_MAX) });
      };
      const take = (d: Buffer) => (output = (output + d.toString()).slice(0, OUTPUT_MAX));
      child.stdout.on('data', take);
      child.stderr.on('data', take);
      const timer = setTimeout(() => {
        killed = true;
        killGroup();
      }, check.timeoutMs);
      child.on('error', (err) => finish(false, `cannot run ${check.run}: ${err.message}`));
      // Resolve at exit (not when the pipes close): a process it left behind must not hold the PR.
      child.on('exit', (code) => setTimeout(() => {
        const note = killed ? `\n(killed after its time limit of ${check.timeoutMs} ms)` : '';
        finish(!killed && code === 0, (output || `exit ${code}`) + note);
      }, 50));
    });
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Run the named checks; unknown names are refused before anything runs. */
export async function runChecks(p: Proposal, names: string[], custom: CustomCheck[], definitionProblems: string[]): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  if (definitionProblems.length > 0) results.push({ name: 'checks.yaml', ok: false, output: definitionProblems.join('\n'), ms: 0 });
  for (const name of names) {
    const started = Date.now();
    const def = custom.find((c) => c.name === name);
    if (def) {
      const { ok, output } = await runCustom(p, def);
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
