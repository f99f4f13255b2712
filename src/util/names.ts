import { UserError } from './errors.js';

const ROLE = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const BRANCH = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

function describe(name: string): string {
  return JSON.stringify(name).slice(0, 80);
}

/** Whether a name could be a Home's (validateRole says why not). */
export const isRoleName = (name: unknown): boolean => typeof name === 'string' && ROLE.test(name);

/** A role names a Home and its mount directory: lower-case letters, digits, '-' and '_', 1-63 characters. */
export function validateRole(role: string): string {
  if (typeof role !== 'string' || !ROLE.test(role)) {
    throw new UserError(
      `invalid role name ${describe(role)}: use 1-63 characters from a-z, 0-9, '-' and '_', starting with a letter or digit`,
    );
  }
  return role;
}

/** A name that becomes one component of a git ref and of a path (a branch, a checkpoint): no slashes, no '..'. */
export function validateRefName(name: string, what: string): string {
  if (typeof name !== 'string' || !BRANCH.test(name) || name.includes('..') || name.endsWith('.lock') || name.endsWith('.')) {
    throw new UserError(
      `invalid ${what} name ${describe(name)}: use 1-100 characters from A-Z, a-z, 0-9, '.', '-' and '_', starting with a letter or digit, without '..' or a '.lock' ending`,
    );
  }
  return name;
}

/** A branch name becomes part of a path (<role>@<branch>) and a git ref: no slashes, no '..', no control characters. */
export function validateBranch(branch: string): string {
  validateRefName(branch, 'branch');
  if (branch === 'main') throw new UserError('"main" is the protected line of every Home; choose another branch name');
  // Names git reads as something else: HEAD and its kin, and hex strings that may be taken for a commit id.
  if (/^[A-Z_]*HEAD$/.test(branch) || /^[0-9a-f]{4,40}$/i.test(branch)) {
    throw new UserError(`invalid branch name ${describe(branch)}: git would read it as ${/HEAD$/.test(branch) ? 'a special ref' : 'a commit id'}; choose another name`);
  }
  return branch;
}

/**
 * A path inside a Home, relative, with '/' separators. Rejects absolute paths, '.' and '..' components,
 * empty components, NUL and other control characters, and over-long names (255 bytes a component, 4096 in all).
 */
export function validateRelPath(path: string): string {
  if (typeof path !== 'string' || path.length === 0) throw new UserError('expected a path inside the Home, got an empty one');
  const clean = path.replace(/\/+$/, '');
  if (clean.startsWith('/')) throw new UserError(`path ${describe(path)} must be relative to the Home`);
  if (Buffer.byteLength(clean) > 4096) throw new UserError('path is longer than 4096 bytes');
  for (const part of clean.split('/')) {
    if (part === '' || part === '.' || part === '..') throw new UserError(`path ${describe(path)} has an empty, '.' or '..' component`);
    if (/[\x00-\x1f\x7f]/.test(part)) throw new UserError(`path ${describe(path)} contains a control character`);
    if (Buffer.byteLength(part) > 255) throw new UserError(`a component of path ${describe(path)} is longer than 255 bytes`);
  }
  return clean;
}
