import { isDeepStrictEqual } from 'node:util';
import type { Place, Sys } from './sys.js';

/**
 * One list of POSIX cases, each run in a fresh directory of every target: a native directory (the
 * baseline); through the mount, a branch view's versioned folder, its workspace/ (scratch, the disk itself),
 * a folder its .gitignore ignores (scratch, served by nasd) and main (read-only); and in process, without a
 * mount, a branch view called directly (in-process.ts): a versioned folder and an ignored one.
 *
 * A case's outcome is 'OK', an errno code (from a syscall, or read from a tool's message), or the name
 * of a check that did not hold (`same(..., 'content')`). The native directory must give 'OK'. Where a view
 * gives something else, the case says so in `expect` with the reason in `why`, and `gap: true` marks a
 * difference that is today's behaviour rather than an intended one: the table of differences is this file
 * (with cases-metadata.ts and cases-special.ts). A case that needs a real path (a tool, another process, the
 * kernel's permission checks) says so in `mountOnly`, and the in-process targets pass it over.
 */

export type Target = 'native' | 'versioned' | 'workspace' | 'ignored' | 'main' | 'in-process' | 'in-process-ignored';

/** The in-process targets run the view code their mounted twins run: a difference declared there holds here too. */
export const TWIN: Partial<Record<Target, Target>> = { 'in-process': 'versioned', 'in-process-ignored': 'ignored' };

export interface PosixCase {
  name: string;
  /** Fixtures, made with plain calls before the case runs (for main: natively, then pushed with git by the owner). */
  setup?: (dir: string, fs: Sys) => Promise<void>;
  /** The operations under test and their checks; throws to report an outcome other than 'OK'. */
  run: (dir: string, fs: Sys, place: Place) => Promise<void>;
  /** false for a case that only reads: on main it must then behave as natively. Default: true (main gives EROFS). */
  mutates?: boolean;
  /** The outcome where a target differs from native (an in-process target inherits its twin's). */
  expect?: Partial<Record<Target, string>>;
  /** Why it differs: required with `expect`. */
  why?: string;
  /** The difference is a known gap (today's behaviour, not a design decision). */
  gap?: boolean;
  /** Where a target refuses the case (the errno it declares, or main's EROFS): what must hold then, e.g. no name left behind. */
  afterRefusal?: (dir: string, fs: Sys) => Promise<void>;
  /** Why the case needs the mount (or a native directory): the in-process targets skip it. */
  mountOnly?: string;
}

/** Why a case that runs a real tool cannot run in process. */
export const TOOL = 'runs a real tool, which needs a path the kernel resolves (a native directory or the mount)';

/** A check that did not hold: its code names what differed. */
export class Differs extends Error {
  constructor(readonly code: string, detail: string) {
    super(`${code}: ${detail}`);
  }
}

export function same(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) throw new Differs(what, `got ${JSON.stringify(actual, bigints)}, native gives ${JSON.stringify(expected, bigints)}`);
}

/** A text (a tool's output) must match: `what` names the check. */
export function matches(actual: string, pattern: RegExp, what: string): void {
  if (!pattern.test(actual)) throw new Differs(what, `got ${JSON.stringify(actual)}, native matches ${pattern}`);
}

const bigints = (_key: string, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v);

/** The syscall must fail with `code`; any other failure is the outcome. */
export async function fails(p: Promise<unknown>, code: string): Promise<void> {
  try {
    await p;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === code) return;
    throw e;
  }
  throw new Differs(`no-${code}`, `succeeded where native gives ${code}`);
}

/** What a failed tool's message says, as the errno it names. */
const MESSAGES: Record<string, string> = {
  'Read-only file system': 'EROFS', 'Operation not permitted': 'EPERM', 'File exists': 'EEXIST', 'Directory not empty': 'ENOTEMPTY',
  'No such file or directory': 'ENOENT', 'Permission denied': 'EACCES', 'Disk quota exceeded': 'EDQUOT', 'Operation not supported': 'ENOTSUP',
  'Invalid cross-device link': 'EXDEV', 'Is a directory': 'EISDIR', 'Not a directory': 'ENOTDIR',
};

/** A tool that exited with a failure: the errno its message names, else a Differs named after the tool. */
export function toolFailure(cmd: string, stderr: string): Error {
  const known = Object.entries(MESSAGES).find(([text]) => stderr.includes(text));
  if (known) return Object.assign(new Error(`${cmd}: ${stderr.trim()}`), { code: known[1] });
  return new Differs(`${cmd}-failed`, stderr.trim());
}

/** A directory's names; `.keep` is how main's fixtures keep a directory in git, not part of a case. */
export const names = async (fs: Sys, dir: string) => (await fs.readdir(dir)).filter((n) => n !== '.keep').sort();

/** Nothing is at p (a refused call left no name behind). */
export async function absent(fs: Sys, p: string): Promise<void> {
  try {
    await fs.lstat(p);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  throw new Differs('left-behind', `${p} exists after the call was refused`);
}
