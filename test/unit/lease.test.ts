import { describe, expect, it } from 'vitest';
import { checkNarrowing, LeaseRefused, newToken, parseToken, refusal, tokenMatches, validateScopes, type Lease, type LeaseRequest } from '../../src/lease/lease.js';
import { decide, EGRESS_REASON, type MergeFacts } from '../../src/merge/merge-policy.js';
import { conflictHunks } from '../../src/merge/hunks.js';
import { modeRisk } from '../../src/merge/mode-risk.js';
import { parseCheckDefinitions } from '../../src/merge/checks.js';

/** Unit tests of the pure parts of Agent PRs: lease rules, the merge policy, conflict hunks, check definitions. */

const HOUR = 3600_000;
const lease = (over: Partial<Lease> = {}): Lease => ({
  id: 'l-000000000001', home: 'demo', branch: 'draft', principal: 'alice', scopes: ['propose:main', 'write'],
  created: new Date().toISOString(), expires: new Date(Date.now() + HOUR).toISOString(), token_sha256: 'x', ...over,
});
const request = (over: Partial<LeaseRequest> = {}): LeaseRequest => ({
  home: 'demo', branch: 'draft', principal: 'alice', scopes: ['write'], expires: new Date(Date.now() + HOUR / 2), ...over,
});

describe('leases', () => {
  it('validates scopes', () => {
    expect(validateScopes(['write', 'propose:main', 'write'])).toEqual(['propose:main', 'write']);
    expect(() => validateScopes([])).toThrow(/at least one scope/);
    expect(() => validateScopes(['admin'])).toThrow(/unknown scope "admin"/);
    expect(() => validateScopes(['propose:prod'])).toThrow(/the only target is main/);
    expect(validateScopes(['write', 'egress', 'propose:main'])).toEqual(['egress', 'propose:main', 'write']);
    expect(() => validateScopes(['network'])).toThrow(/unknown scope "network": scopes are write, propose:<target> and egress/);
  });

  it('gives a sub-lease egress only when its parent has it', () => {
    const narrowing = (parentScopes: string[], scopes: string[]) => () => checkNarrowing(lease({ scopes: parentScopes }), request({ scopes }));
    expect(narrowing(['propose:main', 'write'], ['egress', 'write'])).toThrow(/asks for egress, which the parent does not have \(propose:main, write\)/);
    expect(narrowing(['egress', 'propose:main', 'write'], ['egress', 'write'])).not.toThrow();
    // Dropping egress is narrowing too.
    expect(narrowing(['egress', 'propose:main', 'write'], ['write'])).not.toThrow();
  });

  it('lets a sub-lease narrow, and refuses every way of asking for more', () => {
    const parent = lease({ budget_bytes: 1000 });
    expect(() => checkNarrowing(parent, request({ budgetBytes: 500 }))).not.toThrow();
    const refused = (r: LeaseRequest) => {
      try {
        checkNarrowing(parent, r);
        return '';
      } catch (e) {
        expect(e).toBeInstanceOf(LeaseRefused);
        return (e as Error).message;
      }
    };
    expect(refused(request({ budgetBytes: 500, scopes: ['write', 'propose:main', 'admin'] }))).toMatch(/asks for admin/);
    expect(refused(request({ budgetBytes: 500, expires: new Date(Date.now() + 2 * HOUR) }))).toMatch(/would outlive the parent/);
    expect(refused(request({ budgetBytes: 2000 }))).toMatch(/at most the parent's 1000 bytes/);
    expect(refused(request({}))).toMatch(/at most the parent's 1000 bytes/);
    expect(refused(request({ budgetBytes: 1, branch: 'other' }))).toMatch(/it is for demo\/other, the parent for demo\/draft/);
    expect(refused(request({ budgetBytes: 1, principal: 'bob' }))).toMatch(/principal bob is not the parent's/);
  });

  it('refuses an expired or revoked lease, or one whose parent is; and one for another Home, branch or scope', () => {
    const want = { home: 'demo', branch: 'draft', scope: 'propose:main' };
    expect(refusal([lease()], want)).toBeNull();
    expect(refusal([lease({ expires: new Date(Date.now() - 1).toISOString() })], want)).toMatch(/expired at/);
    expect(refusal([lease({ revoked: '2026-11-30T00:00:00Z' })], want)).toMatch(/is revoked/);
    expect(refusal([lease({ parent: 'l-p' }), lease({ id: 'l-p', revoked: 'then' })], want)).toMatch(/its parent l-p was revoked/);
    expect(refusal([lease({ home: 'ops' })], want)).toMatch(/is for the Home ops, not demo/);
    expect(refusal([lease({ branch: 'x' })], want)).toMatch(/is for the branch x, not draft/);
    expect(refusal([lease({ scopes: ['write'] })], want)).toMatch(/does not grant propose:main/);
  });

  it('keeps only a hash of the token and checks it in constant time', () => {
    const t = newToken();
    const parsed = parseToken(t.token)!;
    expect(parsed.id).toBe(t.id);
    expect(t.sha256).not.toContain(parsed.secret);
    expect(tokenMatches(lease({ token_sha256: t.sha256 }), parsed.secret)).toBe(true);
    expect(tokenMatches(lease({ token_sha256: t.sha256 }), parsed.secret.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')))).toBe(false);
    expect(parseToken('nas1.l-xyz.short')).toBeNull();
  });
});

describe('merge policy', () => {
  const facts = (over: Partial<MergeFacts> = {}): MergeFacts => ({
    auto: true, policyProblems: [], checks: [{ name: 'links', ok: true }], deleted: [], metadata: [], reviewedClaims: [], inboxReads: [], startSet: [], needsPerson: [], modeRisks: [], ...over,
  });

  it('merges only when every condition holds', () => {
    expect(decide(facts())).toEqual({ action: 'merge' });
  });

  it('fails on a failed check, and waits for each risk with its reason', () => {
    expect(decide(facts({ checks: [{ name: 'links', ok: false }], deleted: ['a'] }))).toEqual({ action: 'fail', reasons: ['check(s) failed: links'] });
    expect(decide(facts({ deleted: ['a.md'] }))).toEqual({ action: 'wait', reasons: ['deletes a.md'] });
    expect(decide(facts({ egressToPerson: true }))).toEqual({ action: 'wait', reasons: [EGRESS_REASON] });
    expect(EGRESS_REASON).toBe('the run had network egress (lease scope egress): a person decides');
    expect(decide(facts({ egressToPerson: false }))).toEqual({ action: 'merge' });
    expect(decide(facts({ failedRun: '3' }))).toEqual({ action: 'wait', reasons: ["the run's command failed (exit 3): its work may be unfinished"] });
    expect(decide(facts({ metadata: ['.nas/policy.yaml'] }))).toEqual({ action: 'wait', reasons: ['changes Home metadata: .nas/policy.yaml'] });
    expect(decide(facts({ reviewedClaims: ['memory/notes/x.md'] }))).toEqual({ action: 'wait', reasons: ['marks notes reviewed: memory/notes/x.md'] });
    expect(decide(facts({ inboxReads: ['inbox/t.md'] }))).toEqual({ action: 'wait', reasons: ['the run read untrusted input: inbox/t.md'] });
    expect(decide(facts({ startSet: ['AGENTS.md'] }))).toEqual({ action: 'wait', reasons: ['changes what agents load at session start: AGENTS.md'] });
    expect(decide(facts({ needsPerson: ['config.toml'] }))).toEqual({ action: 'wait', reasons: ['main changed config.toml too, and no merge driver in .nas/merge.yaml merges it: a person decides'] });
    expect(decide(facts({ auto: false })).action).toBe('wait');
    expect(decide(facts({ policyProblems: ['.nas/policy.yaml: malformed'] })).action).toBe('wait');
    expect(decide(facts({ modeRisks: ['bin/tool 100755 -> 104755 (setuid)'] }))).toEqual({ action: 'wait', reasons: ['gives modes a person must see (mode-risk): bin/tool 100755 -> 104755 (setuid)'] });
    const many = decide(facts({ deleted: Array.from({ length: 8 }, (_, i) => `f${i}`) }));
    expect(many).toEqual({ action: 'wait', reasons: ['deletes f0, f1, f2, f3, f4 and 3 more'] });
  });
});

describe('mode risk', () => {
  it('names a file that becomes setuid, setgid or world-writable, and a setuid file whose content changes', () => {
    expect(modeRisk('bin/tool', 0o100755, 0o104755, false)).toBe('bin/tool 100755 -> 104755 (setuid)');
    expect(modeRisk('bin/tool', undefined, 0o106755, true)).toBe('bin/tool is new with mode 106755 (setuid, setgid)');
    expect(modeRisk('notes.md', 0o100644, 0o100666, false)).toBe('notes.md 100644 -> 100666 (world-writable)');
    expect(modeRisk('shared', 0o040755, 0o041777, false)).toBe('shared/ 040755 -> 041777 (world-writable)');
    expect(modeRisk('bin/tool', 0o104755, 0o104755, true)).toBe('bin/tool changed, with mode 104755 (setuid)');
    // Taking a bit away, an ordinary mode, a symlink, a removal: nothing to see.
    expect(modeRisk('bin/tool', 0o104755, 0o100755, false)).toBeNull();
    expect(modeRisk('a.sh', 0o100644, 0o100755, true)).toBeNull();
    expect(modeRisk('link', undefined, 0o120000, false)).toBeNull();
    expect(modeRisk('gone', 0o104755, undefined, false)).toBeNull();
  });
});

describe('conflict hunks', () => {
  it('finds the lines both sides changed, and nothing where only one did', () => {
    const base = 'a\nb\nc\nd\ne\n';
    expect(conflictHunks(base, 'a\nB1\nc\nd\ne\n', 'a\nB2\nc\nd\nE\n')).toEqual([{ line: 2, base: ['b'], ours: ['B1'], theirs: ['B2'] }]);
    expect(conflictHunks(base, 'a\nb\nc\nd\ne\nx\n', 'a\nb\nc\nd\ne\ny\n')).toEqual([{ line: 6, base: [], ours: ['x'], theirs: ['y'] }]);
    expect(conflictHunks(base, 'A\nb\nc\nd\ne\n', 'a\nb\nc\nd\nE\n')).toEqual([]);
    expect(conflictHunks(base, 'a\nX\nc\nd\ne\n', 'a\nX\nc\nd\ne\n')).toEqual([]);
  });
});

describe('check definitions', () => {
  it('reads custom checks and reports bad entries without stopping', () => {
    const { checks, problems } = parseCheckDefinitions('version: 1\nchecks:\n  - name: lint\n    run: .nas/checks/lint.sh\n    timeout: 5s\n  - name: links\n    run: x\n  - name: esc\n    run: ../../bin/sh\n');
    expect(checks).toEqual([{ name: 'lint', run: '.nas/checks/lint.sh', timeoutMs: 5000 }]);
    expect(problems).toEqual([
      '.nas/checks.yaml: entry 2: name must be a new lower-case name (not links, schema, memory, journal)',
      '.nas/checks.yaml: esc: run must be a path in the Home, e.g. .nas/checks/esc.sh',
    ]);
    expect(parseCheckDefinitions('checks: [\n').problems[0]).toMatch(/^\.nas\/checks.yaml: line \d+: /);
    expect(parseCheckDefinitions(null)).toEqual({ checks: [], problems: [] });
  });
});
