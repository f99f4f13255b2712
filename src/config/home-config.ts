import yaml from 'js-yaml';
import { parseDuration } from '../util/duration.js';
import { isRoleName } from '../util/names.js';

/**
 * The `.nas/*.yaml` metadata of a Home: documented schemas, validated on every read.
 * A file that does not parse or validate yields its defaults plus a list of problems, never an exception:
 * the daemon keeps serving and reports the problem (see `nas home list`).
 */

export interface RoleConfig {
  version: 1;
  role: string;
  description: string;
  owner: string;
  created: string;
  /**
   * Other Homes whose memory index this Home reads (shared scopes): their reviewed notes show in the
   * READ-ON-DEMAND part of this Home's context, read from their main, never resident.
   */
  shared: string[];
}

export interface LimitsConfig {
  version: 1;
  /** Bytes a branch may hold in its upper directory (new and changed files, scratch included). */
  branch_quota_bytes: number;
  /** Bytes all branches of the Home together may hold in their upper directories. */
  home_quota_bytes: number;
  /** Branches the Home may have at once; creating one more is refused. */
  max_branches: number;
  /** TTL for branches created without --ttl. */
  branch_ttl_default: string;
  /** How long an expired branch stays (read-only, for inspection) before its work goes to the recycle area. */
  branch_grace: string;
  /**
   * How long a branch whose work merged into main stays before it is removed (`0s`: at once); a branch made by
   * `nas run` goes at once whatever this says. One that takes writes after the merge stays.
   */
  merged_branch_grace: string;
  /** Token cap (o200k_base) for memory/MEMORY.md. */
  memory_md_max_tokens: number;
  /** Byte budgets for the resident (read-on-start) set. */
  resident_bytes: { rules: number; shared: number; agent: number; total: number };
}

export type RetentionClass = 'versioned' | 'scratch';

export interface MaintenanceConfig {
  version: 1;
  /** Per-path retention classes; paths not listed are versioned. */
  retention: { path: string; class: RetentionClass }[];
  /** Days the recycle area keeps a deleted file (fractions allowed: 0.5 is twelve hours). */
  trash_keep_days: number;
}

export interface PolicyConfig {
  version: 1;
  /** Extra read-only patterns for branch views (EPERM); `.nas/**` is always read-only. */
  read_only: string[];
  /** Extra append-only patterns (EPERM on truncate, overwrite, rename, unlink); `memory/journal/**` always is. */
  append_only: string[];
  /**
   * Agent PRs: whether a PR that meets every condition merges by itself, the checks every PR runs, and what a
   * PR of a run that had network egress (its lease's `egress` scope) does: `record` it only, or wait for a `person`.
   */
  merge: { auto: boolean; required_checks: string[]; egress: EgressRule };
}

/** merge.egress in policy.yaml: a run's egress is always recorded on its PR; `person` also makes the PR wait. */
export type EgressRule = 'record' | 'person';
export const EGRESS_RULES: readonly EgressRule[] = ['record', 'person'];

/**
 * How a file changed on both main and a branch is merged: `json` and `yaml` key by key (stopping on a key both
 * changed differently), `text` line by line, `person` always at the Human Gate.
 */
export type MergeDriver = 'json' | 'yaml' | 'text' | 'person';
export const MERGE_DRIVERS: readonly MergeDriver[] = ['json', 'yaml', 'text', 'person'];

export interface MergeConfig {
  version: 1;
  /** The first rule whose glob matches a path names its driver. */
  drivers: { path: string; driver: MergeDriver }[];
}

export interface HomeConfig {
  role: Partial<RoleConfig>;
  merge: MergeConfig;
  limits: LimitsConfig;
  maintenance: MaintenanceConfig;
  policy: PolicyConfig;
  /** Everything wrong with the `.nas/` files; the defaults stand in for what could not be read. */
  problems: string[];
}

export interface Parsed<T> {
  value: T;
  problems: string[];
}

export const DEFAULT_LIMITS: LimitsConfig = {
  version: 1,
  branch_quota_bytes: 2 * 1024 ** 3,
  home_quota_bytes: 20 * 1024 ** 3,
  max_branches: 100,
  branch_ttl_default: '48h',
  branch_grace: '7d',
  merged_branch_grace: '1d',
  memory_md_max_tokens: 1000,
  resident_bytes: { rules: 4096, shared: 4096, agent: 2048, total: 10240 },
};

export const DEFAULT_MAINTENANCE: MaintenanceConfig = {
  version: 1,
  retention: [{ path: 'workspace/', class: 'scratch' }],
  trash_keep_days: 7,
};

export const DEFAULT_MERGE: MergeConfig = {
  version: 1,
  drivers: [
    { path: '**/*.json', driver: 'json' },
    { path: '**/*.yaml', driver: 'yaml' },
    { path: '**/*.yml', driver: 'yaml' },
  ],
};

export const BUILTIN_CHECKS = ['links', 'schema', 'memory', 'journal'];

export const DEFAULT_POLICY: PolicyConfig = {
  version: 1,
  read_only: ['.nas/**'],
  append_only: ['memory/journal/**'],
  merge: { auto: true, required_checks: BUILTIN_CHECKS, egress: 'record' },
};

type Check = (value: unknown) => string | null;
const isInt = (min: number): Check => (v) => (Number.isInteger(v) && (v as number) >= min ? null : `must be an integer >= ${min}`);
const isNumber = (min: number): Check => (v) => (typeof v === 'number' && Number.isFinite(v) && v >= min ? null : `must be a number >= ${min}`);
const isString: Check = (v) => (typeof v === 'string' && v.length > 0 ? null : 'must be a non-empty string');
const isStringList: Check = (v) =>
  Array.isArray(v) && v.every((x) => typeof x === 'string' && x.length > 0) ? null : 'must be a list of non-empty strings';
const isDuration = (opts: { allowZero?: boolean } = {}): Check => (v) => {
  try {
    parseDuration(String(v), opts);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
};

/** Parse YAML text into a mapping, naming the file and line on failure. */
function loadMapping(file: string, text: string, problems: string[]): Record<string, unknown> | null {
  try {
    const doc = yaml.load(text, { schema: yaml.CORE_SCHEMA });
    if (doc === undefined || doc === null) return {};
    if (typeof doc !== 'object' || Array.isArray(doc)) {
      problems.push(`${file}: expected a mapping of keys to values at the top level`);
      return null;
    }
    return doc as Record<string, unknown>;
  } catch (e) {
    const err = e as { mark?: { line: number }; reason?: string; message: string };
    const where = err.mark ? `line ${err.mark.line + 1}` : 'unknown line';
    problems.push(`${file}: malformed YAML at ${where}: ${err.reason ?? err.message}`);
    return null;
  }
}

/** Validate known keys against checks; unknown keys are reported so typos do not silently do nothing. */
function validate<T extends object>(file: string, doc: Record<string, unknown>, defaults: T, checks: Record<string, Check>, problems: string[]): T {
  const out: Record<string, unknown> = { ...(defaults as Record<string, unknown>) };
  for (const [key, val] of Object.entries(doc)) {
    const check = checks[key];
    if (!check) {
      problems.push(`${file}: unknown key "${key}" (known: ${Object.keys(checks).join(', ')})`);
      continue;
    }
    const problem = check(val);
    if (problem) problems.push(`${file}: "${key}" ${problem}; using the default`);
    else out[key] = val;
  }
  return out as T;
}

const isVersion: Check = (v) => (v === 1 ? null : 'must be 1');

export function parseLimits(text: string, file = '.nas/limits.yaml'): Parsed<LimitsConfig> {
  const problems: string[] = [];
  const doc = loadMapping(file, text, problems);
  if (!doc) return { value: DEFAULT_LIMITS, problems };
  const isBudgets: Check = (v) => {
    if (!v || typeof v !== 'object') return 'must be a mapping with rules, shared, agent, total';
    for (const k of ['rules', 'shared', 'agent', 'total']) {
      const n = (v as Record<string, unknown>)[k];
      if (n !== undefined && !(Number.isInteger(n) && (n as number) >= 0)) return `.${k} must be an integer >= 0`;
    }
    return null;
  };
  const value = validate(file, doc, DEFAULT_LIMITS, {
    version: isVersion,
    branch_quota_bytes: isInt(0),
    home_quota_bytes: isInt(0),
    max_branches: isInt(1),
    branch_ttl_default: isDuration(),
    branch_grace: isDuration(),
    merged_branch_grace: isDuration({ allowZero: true }),
    memory_md_max_tokens: isInt(1),
    resident_bytes: isBudgets,
  }, problems);
  value.resident_bytes = { ...DEFAULT_LIMITS.resident_bytes, ...value.resident_bytes };
  return { value, problems };
}

export function parseMaintenance(text: string, file = '.nas/maintenance.yaml'): Parsed<MaintenanceConfig> {
  const problems: string[] = [];
  const doc = loadMapping(file, text, problems);
  if (!doc) return { value: DEFAULT_MAINTENANCE, problems };
  const isRetention: Check = (v) => {
    if (!Array.isArray(v)) return 'must be a list of {path, class} entries';
    for (const [i, r] of v.entries()) {
      if (!r || typeof r !== 'object') return `entry ${i + 1} must be a mapping with path and class`;
      const { path, class: cls } = r as Record<string, unknown>;
      if (typeof path !== 'string' || !path || path.includes('..')) return `entry ${i + 1}: path must be a relative path`;
      if (cls !== 'versioned' && cls !== 'scratch') return `entry ${i + 1}: class must be "versioned" or "scratch"`;
    }
    return null;
  };
  const value = validate(file, doc, DEFAULT_MAINTENANCE, { version: isVersion, retention: isRetention, trash_keep_days: isNumber(0) }, problems);
  return { value, problems };
}

export function parsePolicy(text: string, file = '.nas/policy.yaml'): Parsed<PolicyConfig> {
  const problems: string[] = [];
  const doc = loadMapping(file, text, problems);
  if (!doc) return { value: DEFAULT_POLICY, problems };
  const isMerge: Check = (v) => {
    if (!v || typeof v !== 'object' || Array.isArray(v)) return 'must be a mapping with auto, required_checks and egress';
    const { auto, required_checks: checks, egress, ...rest } = v as Record<string, unknown>;
    if (Object.keys(rest).length > 0) return `has unknown keys ${Object.keys(rest).join(', ')} (known: auto, required_checks, egress)`;
    if (auto !== undefined && typeof auto !== 'boolean') return '.auto must be true or false';
    if (egress !== undefined && !EGRESS_RULES.includes(egress as EgressRule)) return `.egress must be ${EGRESS_RULES.join(' or ')}, not ${JSON.stringify(egress)}`;
    if (checks !== undefined && isStringList(checks)) return '.required_checks must be a list of check names';
    return null;
  };
  const value = validate(file, doc, DEFAULT_POLICY, { version: isVersion, read_only: isStringList, append_only: isStringList, merge: isMerge }, problems);
  value.merge = { ...DEFAULT_POLICY.merge, ...value.merge };
  return { value, problems };
}

export function parseMerge(text: string, file = '.nas/merge.yaml'): Parsed<MergeConfig> {
  const problems: string[] = [];
  const doc = loadMapping(file, text, problems);
  if (!doc) return { value: DEFAULT_MERGE, problems };
  const isDrivers: Check = (v) => {
    if (!Array.isArray(v)) return 'must be a list of {path, driver} entries';
    for (const [i, r] of v.entries()) {
      if (!r || typeof r !== 'object') return `entry ${i + 1} must be a mapping with path and driver`;
      const { path, driver } = r as Record<string, unknown>;
      if (typeof path !== 'string' || !path || path.includes('..')) return `entry ${i + 1}: path must be a glob of relative paths`;
      if (!MERGE_DRIVERS.includes(driver as MergeDriver)) return `entry ${i + 1}: driver must be one of ${MERGE_DRIVERS.join(', ')}`;
    }
    return null;
  };
  return { value: validate(file, doc, DEFAULT_MERGE, { version: isVersion, drivers: isDrivers }, problems), problems };
}

const isHomeList: Check = (v) => {
  if (!Array.isArray(v)) return 'must be a list of Home names';
  const bad = v.find((x) => !isRoleName(x));
  return bad === undefined ? null : `names ${JSON.stringify(bad).slice(0, 80)}, not a Home name (a-z, 0-9, '-' and '_')`;
};

export function parseRole(text: string, file = '.nas/role.yaml'): Parsed<Partial<RoleConfig>> {
  const problems: string[] = [];
  const doc = loadMapping(file, text, problems);
  if (!doc) return { value: {}, problems };
  const value = validate<Partial<RoleConfig>>(file, doc, {}, {
    version: isVersion, role: isString, description: (v) => (typeof v === 'string' ? null : 'must be a string'), owner: isString, created: isString,
    shared: isHomeList,
  }, problems);
  return { value, problems };
}

/** A Home's whole `.nas/` metadata, given a way to read one file's text (null: missing). */
export async function readHomeConfig(read: (path: string) => Promise<string | null>): Promise<HomeConfig> {
  const problems: string[] = [];
  const take = async <T>(path: string, parse: (text: string) => Parsed<T>, optional = false): Promise<T> => {
    const text = await read(path);
    if (text === null && !optional) problems.push(`${path}: missing; using the defaults`);
    const parsed = parse(text ?? '');
    problems.push(...parsed.problems);
    return parsed.value;
  };
  return {
    role: await take('.nas/role.yaml', parseRole),
    limits: await take('.nas/limits.yaml', parseLimits),
    maintenance: await take('.nas/maintenance.yaml', parseMaintenance),
    policy: await take('.nas/policy.yaml', parsePolicy),
    // Homes made before merge drivers existed have none: the built-in drivers apply, nothing to report.
    merge: await take('.nas/merge.yaml', parseMerge, true),
    problems,
  };
}

/** Scratch roots (plain top-level directories such as workspace/) that every view shows, even main. */
export function scratchRoots(maintenance: MaintenanceConfig): string[] {
  return maintenance.retention
    .filter((r) => r.class === 'scratch')
    .map((r) => r.path.replace(/\/+$/, ''))
    .filter((p) => /^[^/*?]+$/.test(p));
}
