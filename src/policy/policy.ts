import type { ErrnoCode } from '../util/errors.js';
import { globToRegExp, matchesAny } from '../util/glob.js';
import { DIR_RECORD, isMetaPath } from '../store/file-meta.js';
import { DEFAULT_MAINTENANCE, DEFAULT_POLICY, type MaintenanceConfig, type PolicyConfig } from '../config/home-config.js';

/**
 * Syscall-level rules, as pure functions over plain data: given an operation, a Home-relative path and
 * the kind of view, allow it (null) or name the errno the caller sees.
 */

export type Mutation =
  | 'create' | 'mkdir' | 'symlink' | 'link'
  | 'open-write' | 'write' | 'truncate' | 'chmod' | 'utimens'
  | 'unlink' | 'rmdir' | 'rename-from' | 'rename-to' | 'mknod';

export type ViewKind = 'main' | 'branch';

export interface Rules {
  readOnly: RegExp[];
  appendOnly: RegExp[];
  scratch: RegExp[];
}

/** Rules that hold whatever a Home's policy.yaml says: a branch cannot loosen them by editing .nas/. */
const BUILT_IN_READ_ONLY = ['.nas/**'];
const BUILT_IN_APPEND_ONLY = ['memory/journal/**'];

/**
 * What is scratch by default in every Home, in `.gitignore` syntax, below whatever the Home's own `.gitignore` files
 * say (as git's core.excludesFile: a Home's rule, `!` included, wins): editors' temporary files, which would
 * otherwise fill the recycle area with every save. Homes made before the template named them get them too. As with
 * any ignore rule, a tracked file stays versioned and a protected path (isProtected) is never scratch.
 */
export const BUILT_IN_IGNORE = [
  // vim: swap files (.x.swp, .x.swo, ...), the .swx probe it makes before a swap file, the 4913 probe it writes
  // beside a file to test ownership before a save, and `~` backups (also emacs, nano, gedit)
  '*.swp', '*.swo', '*.swx', '[._]*.sw[a-px]', '4913', '*~',
  // emacs: lock links (.#x) and auto-save files (#x#)
  '.#*', '\\#*#',
].join('\n');

export function compileRules(policy: PolicyConfig = DEFAULT_POLICY, maintenance: MaintenanceConfig = DEFAULT_MAINTENANCE): Rules {
  const compile = (list: string[]) => [...new Set(list)].map(globToRegExp);
  return {
    readOnly: compile([...BUILT_IN_READ_ONLY, ...policy.read_only]),
    appendOnly: compile([...BUILT_IN_APPEND_ONLY, ...policy.append_only]),
    scratch: compile(maintenance.retention.filter((r) => r.class === 'scratch').map((r) => r.path)),
  };
}

export const DEFAULT_RULES = compileRules();

/** What the rules say of one path: each glob list asked once. */
export interface PathClass {
  readOnly: boolean;
  appendOnly: boolean;
  scratch: boolean;
}

/** Paths classified under each Rules object; a new Rules (changed .nas/ policy) starts with none. */
const classes = new WeakMap<Rules, Map<string, PathClass>>();
/** Paths kept per Rules: a Home's working set of directories and files, not every name ever seen. */
const CLASSES_KEPT = 8192;

/**
 * Classify a path once: a request that asks policy several times (a rename asks of both names, for each
 * check) matches the globs once per path. Rules never change in place, so what is kept stays true.
 */
export function classify(rules: Rules, path: string): PathClass {
  let kept = classes.get(rules);
  if (!kept) classes.set(rules, (kept = new Map()));
  let c = kept.get(path);
  if (!c) {
    if (kept.size >= CLASSES_KEPT) kept.clear();
    const readOnly = matchesAny(path, rules.readOnly);
    const appendOnly = matchesAny(path, rules.appendOnly);
    // A protected path is never scratch, whatever maintenance.yaml says: scratch is hidden from git and never committed.
    c = { readOnly, appendOnly, scratch: path !== '' && !readOnly && !appendOnly && matchesAny(path, rules.scratch) };
    kept.set(path, c);
  }
  return c;
}

/** Scratch paths live only in a branch's upper directory: never committed, merged or sent to the recycle area. */
export function isScratch(rules: Rules, path: string): boolean {
  return classify(rules, path).scratch;
}

/** The inbox holds untrusted input. */
export const isInbox = (path: string): boolean => path === 'inbox' || path.startsWith('inbox/');

/**
 * The mode a view reports: the inbox is readable by its owner only (and by a branch's sharers: cow/owner-share.ts),
 * so on a branch every read of untrusted input is the branch principal's and lands in its read manifest, and on
 * main it is the owner's.
 */
export function visibleMode(path: string, mode: number): number {
  return isInbox(path) ? mode & ~0o077 : mode;
}

/** Who reads, as the kernel's permission check sees a process: its uid and every group it is in. */
export interface Reader {
  uid: number;
  gids: number[];
}

/** A caller nasd cannot put a uid to (a socket-group member without a lease): only what everyone may read. */
export const ANYONE: Reader = { uid: -1, gids: [] };

/** Whether the kernel lets a reader do `want` (4 read, 1 search) on a file with this mode and owner; root may. */
export function permits(reader: Reader, st: { mode: number; uid: number; gid: number }, want: number): boolean {
  if (reader.uid === 0) return true;
  const shift = reader.uid === st.uid ? 6 : reader.gids.includes(st.gid) ? 3 : 0;
  return ((st.mode >> shift) & want) === want;
}

/** Read-only or append-only: such paths stay versioned whatever a .gitignore says (a branch cannot hide them). */
export function isProtected(rules: Rules, path: string): boolean {
  const c = classify(rules, path);
  return c.readOnly || c.appendOnly;
}

export function isAppendOnly(rules: Rules, path: string): boolean {
  return classify(rules, path).appendOnly;
}

/**
 * A name git refuses in a tree (core.protectNTFS and core.protectHFS are on by default, and libgit2 agrees):
 * `.git` or its NTFS short name `git~1`, in any case, with trailing dots or spaces, or followed by `:` (an NTFS
 * stream, `.git::$INDEX_ALLOCATION`) or a backslash, or with characters HFS+ ignores. One such name would stop
 * every commit, and a view never shows one from history (git-layer.ts): root's git would take it for a repository.
 */
export function gitRefusesName(name: string): boolean {
  // Most names have no g at all: views ask for every name they list.
  if (!name.includes('g') && !name.includes('G')) return false;
  const n = name.replace(/[\u200b-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g, '').toLowerCase();
  return /^(\.git|git~\d+)[. ]*($|[:\\])/.test(n);
}

/** `.gitmodules` (and its NTFS short name) must be a file: as a directory or a link it fails git fsck. */
export function isGitmodulesName(name: string): boolean {
  return /^(\.gitmodules[. ]*|gitmod~\d+)$/i.test(name);
}

/**
 * Whether a path has a component no versioned tree may hold: one git refuses (see gitRefusesName), or
 * `.nas-meta`, the name a directory's metadata record has in the Store (file-meta.ts).
 */
export const hasUnstorableName = (path: string): boolean => path.split('/').some((n) => n === DIR_RECORD || gitRefusesName(n));

/**
 * All a path with a `.git` or `.nas-meta` component outside scratch may still have done to it (one made before
 * such names were refused): be removed or moved away. Anything else would be a change no commit can take.
 */
const REMOVING: ReadonlySet<Mutation> = new Set(['unlink', 'rmdir', 'rename-from']);

/** What an append-only path still allows (like `chattr +a`): new files and directories, appends (see checkOpenForWrite), chmod, times. */
const APPEND_ALLOWED: ReadonlySet<Mutation> = new Set(['create', 'mkdir', 'open-write', 'write', 'chmod', 'utimens']);

/**
 * Decide a mutation. `exists` tells whether the target already exists (matters for rename-to and create in
 * append-only areas); `ignored` that git ignores the path (a .gitignore rule), which makes it scratch too.
 * Byte-level checks (append offsets, quota) are `checkAppend` and `checkQuota`.
 */
export function checkMutation(view: ViewKind, rules: Rules, op: Mutation, path: string, exists = false, ignored = false): ErrnoCode | null {
  return decideMutation(view, rules, op, path, exists, ignored)?.code ?? null;
}

/** A refusal with its reason for a person: what the rule is and what to do instead (`nas why` shows it). */
export interface Refusal {
  code: ErrnoCode;
  why: string;
}

/** checkMutation with the reason of each refusal. */
export function decideMutation(view: ViewKind, rules: Rules, op: Mutation, path: string, exists = false, ignored = false): Refusal | null {
  const no = (code: ErrnoCode, why: string): Refusal => ({ code, why });
  if (view === 'main') return no('EROFS', 'main is read-only: write in a branch view (<role>@<branch>)');
  if (path === '') return no('EPERM', "a view's root itself cannot be changed");
  // The Store's metadata records live under this name at the root: no view may make or change it.
  if (isMetaPath(path)) return no('EPERM', `${path} is the Store's metadata records: no view may change it`);
  if (classify(rules, path).readOnly) {
    const how = path === '.nas' || path.startsWith('.nas/') ? '.nas/ changes only through nas home config, a reviewed PR' : 'read_only in .nas/policy.yaml';
    return no('EPERM', `${path} is read-only by the Home's policy (${how})`);
  }
  const scratch = ignored || isScratch(rules, path);
  if (!scratch && !REMOVING.has(op) && hasUnstorableName(path)) return no('EPERM', unstorableReason(path));
  if (!scratch && (op === 'mkdir' || op === 'symlink') && isGitmodulesName(path.slice(path.lastIndexOf('/') + 1))) {
    return no('EPERM', `${path} must be a file: git refuses a .gitmodules that is a directory or a link`);
  }
  // Git trees hold neither hard links nor special files.
  if ((op === 'link' || op === 'mknod') && !scratch) {
    return no('EPERM', `a versioned folder holds no ${op === 'link' ? 'hard links' : 'device nodes, FIFOs or sockets'} (git cannot store them): make them under workspace/`);
  }
  if (isAppendOnly(rules, path)) {
    if (op === 'rename-to' && !exists) return null;
    if (!APPEND_ALLOWED.has(op)) return no('EPERM', `${path} is append-only (like chattr +a): add with O_APPEND (>>); no rewrite, truncate, rename or delete`);
  }
  return null;
}

/** Why a path with a name no versioned tree may hold is refused, and where such a thing goes instead. */
function unstorableReason(path: string): string {
  const names = path.split('/');
  const bad = names.find((n) => n === DIR_RECORD || gitRefusesName(n)) ?? path;
  if (bad === DIR_RECORD) return `${DIR_RECORD} is the name of the Store's metadata records: choose another name`;
  const at = names.slice(0, names.indexOf(bad)).join('/');
  return `a versioned folder cannot hold ${bad} (git refuses it in a tree; a nested repository cannot be versioned): ` +
    `clone or init repositories under workspace/ (e.g. git clone <url> workspace/${at ? at.split('/').pop() : 'repo'})`;
}

/**
 * Moving a directory moves everything in it: refused when anything below it, at its old or its new place,
 * is read-only or append-only (else `mv memory m2`, an edit, and `mv m2 memory` would rewrite the journal).
 * `below` lists the paths under the directory, relative to it.
 */
export function checkDirectoryMove(rules: Rules, from: string, to: string, below: string[]): ErrnoCode | null {
  for (const p of below) {
    for (const path of [`${from}/${p}`, `${to}/${p}`]) {
      if (isProtected(rules, path)) return 'EPERM';
    }
  }
  return null;
}

/** Opening an append-only file for writing needs O_APPEND, as with `chattr +a`. */
export function checkOpenForWrite(rules: Rules, path: string, append: boolean, truncate: boolean): ErrnoCode | null {
  if (!isAppendOnly(rules, path)) return null;
  return append && !truncate ? null : 'EPERM';
}

/** A write into an append-only file may not touch bytes that existed when it was opened. */
export function checkAppend(rules: Rules, path: string, offset: number, floor: number): ErrnoCode | null {
  return isAppendOnly(rules, path) && offset < floor ? 'EPERM' : null;
}

/**
 * Putting old content back (a restore) into an append-only file may only make it grow: what it holds now must
 * stay its beginning. `now` is its current content (null: it does not exist), `next` what would replace it
 * (null: the restore would remove it or put something else than a file there). Why not, or null.
 */
export function checkRestore(rules: Rules, path: string, now: Buffer | null, next: Buffer | null): string | null {
  if (!isAppendOnly(rules, path) || now === null) return null;
  if (next === null) return `${path} is append-only: a restore may not remove it or replace it with something else than a file`;
  if (next.length < now.length || !next.subarray(0, now.length).equals(now)) {
    return `${path} is append-only: a restore may only make it grow, and the restored version does not begin with what it holds now; it was left as it is`;
  }
  return null;
}

/** A write that grows the branch past its byte quota fails with EDQUOT. */
export function checkQuota(usedBytes: number, growth: number, quotaBytes: number): ErrnoCode | null {
  return growth > 0 && usedBytes + growth > quotaBytes ? 'EDQUOT' : null;
}
