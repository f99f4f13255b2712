import { describe, expect, it } from 'vitest';
import { ANYONE, checkAppend, checkMutation, checkOpenForWrite, checkQuota, checkRestore, classify, compileRules, DEFAULT_RULES, isAppendOnly, isScratch, permits, type Rules } from '../../src/policy/policy.js';
import { DEFAULT_MAINTENANCE, DEFAULT_POLICY } from '../../src/config/home-config.js';
import { globToRegExp } from '../../src/util/glob.js';

describe('policy', () => {
  const r = DEFAULT_RULES;

  it('refuses every mutation on main with EROFS, and allows ordinary writes in a branch', () => {
    for (const op of ['create', 'mkdir', 'open-write', 'write', 'truncate', 'unlink', 'rmdir', 'rename-from', 'rename-to', 'chmod', 'utimens', 'symlink', 'link'] as const) {
      expect(checkMutation('main', r, op, 'outbox/x.md')).toBe('EROFS');
    }
    expect(checkMutation('branch', r, 'create', 'outbox/x.md')).toBeNull();
    expect(checkMutation('branch', r, 'unlink', 'AGENTS.md')).toBeNull();
  });

  it('makes .nas/ read-only (EPERM), including the directory itself', () => {
    expect(checkMutation('branch', r, 'open-write', '.nas/policy.yaml')).toBe('EPERM');
    expect(checkMutation('branch', r, 'create', '.nas/new.yaml')).toBe('EPERM');
    expect(checkMutation('branch', r, 'rmdir', '.nas')).toBe('EPERM');
    expect(checkMutation('branch', r, 'rename-to', '.nas/x', false)).toBe('EPERM');
    expect(checkMutation('branch', r, 'create', '.nasty')).toBeNull();
  });

  it('makes the journal append-only: new files and appends, nothing else', () => {
    const j = 'memory/journal/2026.md';
    expect(checkMutation('branch', r, 'create', j)).toBeNull();
    expect(checkMutation('branch', r, 'write', j)).toBeNull();
    for (const op of ['truncate', 'unlink', 'rename-from', 'rmdir'] as const) expect(checkMutation('branch', r, op, j)).toBe('EPERM');
    expect(checkMutation('branch', r, 'rename-to', j, true)).toBe('EPERM');
    expect(checkMutation('branch', r, 'rename-to', j, false)).toBeNull();
    expect(checkOpenForWrite(r, j, true, false)).toBeNull();
    expect(checkOpenForWrite(r, j, false, false)).toBe('EPERM');
    expect(checkOpenForWrite(r, j, true, true)).toBe('EPERM');
    expect(checkOpenForWrite(r, 'outbox/a.md', false, true)).toBeNull();
    expect(checkAppend(r, j, 10, 10)).toBeNull();
    expect(checkAppend(r, j, 9, 10)).toBe('EPERM');
    expect(checkAppend(r, 'outbox/a.md', 0, 10)).toBeNull();
  });

  it('refuses .git and hard links outside scratch', () => {
    expect(checkMutation('branch', r, 'mkdir', 'outbox/.git')).toBe('EPERM');
    expect(checkMutation('branch', r, 'create', 'outbox/repo/.git/HEAD')).toBe('EPERM');
    expect(checkMutation('branch', r, 'mkdir', 'workspace/repo/.git')).toBeNull();
    expect(checkMutation('branch', r, 'link', 'outbox/hard')).toBe('EPERM');
    expect(checkMutation('branch', r, 'link', 'workspace/hard')).toBeNull();
    expect(checkMutation('branch', r, 'create', 'outbox/.gitignore')).toBeNull();
  });

  it('lets a .nas-meta or .git path made before such names were refused only be removed or moved away', () => {
    for (const path of ['docs/.nas-meta', 'docs/.nas-meta/x', 'docs/.GIT/config']) {
      for (const op of ['open-write', 'write', 'truncate', 'chmod', 'utimens', 'rename-to'] as const) expect(checkMutation('branch', r, op, path)).toBe('EPERM');
      for (const op of ['unlink', 'rmdir', 'rename-from'] as const) expect(checkMutation('branch', r, op, path)).toBeNull();
    }
    expect(checkMutation('branch', r, 'open-write', 'workspace/.nas-meta')).toBeNull();
  });

  it('classifies scratch paths from maintenance.yaml', () => {
    expect(isScratch(r, 'workspace')).toBe(true);
    expect(isScratch(r, 'workspace/a/b')).toBe(true);
    expect(isScratch(r, 'workspaces')).toBe(false);
    expect(isScratch(r, '')).toBe(false);
    const custom = compileRules(DEFAULT_POLICY, { ...DEFAULT_MAINTENANCE, retention: [{ path: 'cache/**', class: 'scratch' }, { path: 'tmp/', class: 'scratch' }] });
    expect(isScratch(custom, 'cache/x')).toBe(true);
    expect(isScratch(custom, 'tmp')).toBe(true);
    expect(isScratch(custom, 'workspace/x')).toBe(false);
  });

  it('never makes a protected path scratch, whatever maintenance.yaml says', () => {
    const wide = compileRules(DEFAULT_POLICY, { ...DEFAULT_MAINTENANCE, retention: [{ path: 'memory/', class: 'scratch' }, { path: '.nas/', class: 'scratch' }] });
    expect(isScratch(wide, 'memory/notes/a.md')).toBe(true);
    expect(isScratch(wide, 'memory/journal/day.md')).toBe(false);
    expect(isScratch(wide, '.nas/policy.yaml')).toBe(false);
    expect(checkMutation('branch', wide, 'link', 'memory/journal/day.md')).toBe('EPERM');
  });

  it('keeps the built-in rules whatever policy.yaml says', () => {
    const loose = compileRules({ ...DEFAULT_POLICY, read_only: [], append_only: [] });
    expect(checkMutation('branch', loose, 'open-write', '.nas/policy.yaml')).toBe('EPERM');
    expect(checkMutation('branch', loose, 'unlink', 'memory/journal/a.md')).toBe('EPERM');
    const extra = compileRules({ ...DEFAULT_POLICY, read_only: ['skills/**'], append_only: ['outbox/ledger.md'] });
    expect(checkMutation('branch', extra, 'create', 'skills/x/SKILL.md')).toBe('EPERM');
    expect(checkMutation('branch', extra, 'unlink', 'outbox/ledger.md')).toBe('EPERM');
  });

  it('gives EDQUOT only for growth past the quota', () => {
    expect(checkQuota(900, 100, 1000)).toBeNull();
    expect(checkQuota(900, 101, 1000)).toBe('EDQUOT');
    expect(checkQuota(2000, -5, 1000)).toBeNull();
    expect(checkQuota(2000, 0, 1000)).toBeNull();
  });

  it('matches globs by path component', () => {
    expect(globToRegExp('.nas/**').test('.nas')).toBe(true);
    expect(globToRegExp('.nas/**').test('.nas/a/b')).toBe(true);
    expect(globToRegExp('*.md').test('a.md')).toBe(true);
    expect(globToRegExp('*.md').test('dir/a.md')).toBe(false);
    expect(globToRegExp('**/*.md').test('dir/a.md')).toBe(true);
    expect(globToRegExp('**/*.md').test('a.md')).toBe(true);
    expect(globToRegExp('memory/?.md').test('memory/a.md')).toBe(true);
    expect(globToRegExp('a+b/(x)').test('a+b/(x)')).toBe(true);
  });

  it('lets a restore only make an append-only file grow: what it holds stays its beginning', () => {
    const j = 'memory/journal/2026.md';
    const b = (t: string) => Buffer.from(t);
    expect(checkRestore(r, j, b('one\n'), b('one\ntwo\n'))).toBeNull();
    expect(checkRestore(r, j, null, b('anything\n'))).toBeNull();
    expect(checkRestore(r, j, b('one\ntwo\n'), b('one\ntwo\n'))).toBeNull();
    expect(checkRestore(r, j, b('one\ntwo\n'), b('one\n'))).toMatch(/append-only: a restore may only make it grow/);
    expect(checkRestore(r, j, b('one\n'), b('ONE\ntwo\n'))).toMatch(/append-only: a restore may only make it grow/);
    expect(checkRestore(r, j, b('one\n'), null)).toMatch(/append-only: a restore may not remove it/);
    expect(checkRestore(r, 'outbox/a.md', b('one\ntwo\n'), b('x'))).toBeNull();
  });

  it('lets a reader read as the kernel would: owner, group or other bits; root always', () => {
    const secret = { mode: 0o100600, uid: 1000, gid: 1000 };
    const group = { mode: 0o100640, uid: 1000, gid: 50 };
    expect(permits({ uid: 1000, gids: [1000] }, secret, 4)).toBe(true);
    expect(permits({ uid: 1001, gids: [1000] }, secret, 4)).toBe(false);
    expect(permits({ uid: 0, gids: [0] }, secret, 4)).toBe(true);
    expect(permits({ uid: 1001, gids: [1001, 50] }, group, 4)).toBe(true);
    expect(permits(ANYONE, group, 4)).toBe(false);
    expect(permits(ANYONE, { mode: 0o040751, uid: 1000, gid: 1000 }, 1)).toBe(true);
    expect(permits(ANYONE, { mode: 0o040750, uid: 1000, gid: 1000 }, 1)).toBe(false);
  });
});

describe('classify', () => {
  /** A glob that counts how often it is asked. */
  const counting = (source: string) => {
    const re = new RegExp(source);
    let asked = 0;
    const test = re.test.bind(re);
    re.test = (s: string) => (asked++, test(s));
    return { re, asked: () => asked };
  };

  it('matches the globs once per path, however often a request asks; new rules ask again', () => {
    const journal = counting('^memory/journal(/.*)?$');
    const rules: Rules = { readOnly: [], appendOnly: [journal.re], scratch: [] };
    for (let i = 0; i < 6; i++) {
      expect(isAppendOnly(rules, 'memory/journal/day.md')).toBe(true);
      expect(checkMutation('branch', rules, 'rename-from', 'memory/journal/day.md')).toBe('EPERM');
    }
    expect(journal.asked()).toBe(1);
    expect(classify(rules, 'outbox/x.md')).toEqual({ readOnly: false, appendOnly: false, scratch: false });
    expect(journal.asked()).toBe(2);
    const changed: Rules = { ...rules };
    expect(isAppendOnly(changed, 'memory/journal/day.md')).toBe(true);
    expect(journal.asked()).toBe(3);
  });
});
