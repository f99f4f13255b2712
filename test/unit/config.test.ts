import { describe, expect, it } from 'vitest';
import { parseLimits, parseMaintenance, parseMerge, parsePolicy, parseRole, DEFAULT_LIMITS, DEFAULT_MERGE, DEFAULT_POLICY } from '../../src/config/home-config.js';
import { defaultTemplate } from '../../src/home/template.js';
import { validateBranch, validateRelPath, validateRole } from '../../src/util/names.js';
import { parseDuration } from '../../src/util/duration.js';

describe('.nas/ metadata', () => {
  it('parses the template files without problems', () => {
    const files = new Map(defaultTemplate('demo', 'root', new Date()).map((f) => [f.path, f.content.toString()]));
    expect(parseLimits(files.get('.nas/limits.yaml')!).problems).toEqual([]);
    expect(parseMaintenance(files.get('.nas/maintenance.yaml')!).problems).toEqual([]);
    expect(parsePolicy(files.get('.nas/policy.yaml')!).problems).toEqual([]);
    expect(parseMerge(files.get('.nas/merge.yaml')!).problems).toEqual([]);
    expect(parseMerge(files.get('.nas/merge.yaml')!).value).toEqual(DEFAULT_MERGE);
    expect(parseLimits(files.get('.nas/limits.yaml')!).value).toEqual(DEFAULT_LIMITS);
  });

  it('reports malformed YAML with its line and falls back to the defaults', () => {
    const r = parsePolicy('version: 1\nread_only: [".nas/**"\nappend_only: {\n');
    expect(r.value).toEqual(DEFAULT_POLICY);
    expect(r.problems[0]).toMatch(/^\.nas\/policy\.yaml: malformed YAML at line \d+/);
  });

  it('reports wrong types and unknown keys, keeping the valid keys', () => {
    const r = parseLimits('version: 1\nbranch_quota_bytes: lots\nbranch_ttl_default: 3h\nquota: 5\n');
    expect(r.value.branch_quota_bytes).toBe(DEFAULT_LIMITS.branch_quota_bytes);
    expect(r.value.branch_ttl_default).toBe('3h');
    expect(r.problems).toEqual([
      expect.stringMatching(/"branch_quota_bytes" must be an integer/),
      expect.stringMatching(/unknown key "quota"/),
    ]);
    expect(parseMaintenance('retention:\n  - path: ../x\n    class: scratch\n').problems[0]).toMatch(/relative path/);
    expect(parseMaintenance('retention:\n  - path: tmp/\n    class: temporary\n').problems[0]).toMatch(/"versioned" or "scratch"/);
    expect(parsePolicy('- a\n- b\n').problems[0]).toMatch(/expected a mapping/);
    expect(parsePolicy('').problems).toEqual([]);
  });

  it('takes merged_branch_grace as a duration, zero (at once) included, a day by default', () => {
    expect(DEFAULT_LIMITS.merged_branch_grace).toBe('1d');
    expect(parseLimits('merged_branch_grace: 0s\n')).toMatchObject({ value: { merged_branch_grace: '0s' }, problems: [] });
    expect(parseLimits('merged_branch_grace: 2h\n').value.merged_branch_grace).toBe('2h');
    const bad = parseLimits('merged_branch_grace: soon\n');
    expect(bad.value.merged_branch_grace).toBe('1d');
    expect(bad.problems).toEqual([expect.stringMatching(/"merged_branch_grace" invalid duration "soon".*; using the default/)]);
  });

  it("takes role.yaml's shared: as a list of Home names, and names what is not one", () => {
    expect(parseRole('version: 1\nrole: dev\nshared: [team, ops-notes]\n')).toMatchObject({ value: { shared: ['team', 'ops-notes'] }, problems: [] });
    expect(parseRole('role: dev\n').value.shared).toBeUndefined();
    expect(parseRole('shared: team\n').problems).toEqual(['.nas/role.yaml: "shared" must be a list of Home names; using the default']);
    const bad = parseRole('shared: [team, "../etc"]\n');
    expect(bad.value.shared).toBeUndefined();
    expect(bad.problems[0]).toMatch(/"shared" names "\.\.\/etc", not a Home name/);
  });

  it('takes merge.egress as record (the default) or person, and reports anything else', () => {
    expect(DEFAULT_POLICY.merge.egress).toBe('record');
    expect(parsePolicy('merge:\n  egress: person\n')).toMatchObject({ value: { merge: { auto: true, egress: 'person' } }, problems: [] });
    expect(parsePolicy('merge:\n  auto: false\n').value.merge.egress).toBe('record');
    const bad = parsePolicy('merge:\n  egress: ask\n');
    expect(bad.value.merge.egress).toBe('record');
    expect(bad.problems).toEqual([expect.stringMatching(/"merge" \.egress must be record or person, not "ask"; using the default/)]);
  });
});

describe('names', () => {
  it('accepts ordinary names', () => {
    expect(validateRole('demo')).toBe('demo');
    expect(validateBranch('try-1.b_2')).toBe('try-1.b_2');
    expect(validateRelPath('outbox/x.md/')).toBe('outbox/x.md');
  });

  it('rejects hostile names', () => {
    for (const bad of ['', '..', 'a/b', 'A', '-x', 'a\u0000b', 'x'.repeat(64), 'a@b']) expect(() => validateRole(bad), bad).toThrow(/invalid role/);
    for (const bad of ['', '..', 'a..b', 'a/b', '.hidden', 'x.lock', 'a\tb', 'é', 'x'.repeat(101)]) expect(() => validateBranch(bad), bad).toThrow(/invalid branch/);
    expect(() => validateBranch('main')).toThrow(/protected/);
    for (const bad of ['/etc/passwd', 'a/../b', './a', 'a//b', 'a\nb', `${'x'.repeat(256)}/y`]) expect(() => validateRelPath(bad), bad).toThrow();
  });

  it('parses durations', () => {
    expect(parseDuration('48h')).toBe(172800);
    expect(parseDuration('90s')).toBe(90);
    expect(parseDuration('2w')).toBe(1209600);
    for (const bad of ['0h', '48', 'h', '1y', '-1h']) expect(() => parseDuration(bad), bad).toThrow(/duration/);
  });
});
