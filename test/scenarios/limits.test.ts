import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';

describe('limits and policy from .nas/', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('gives EDQUOT for a write past the branch quota, and keeps what fit', async () => {
    const limits = (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).replace(/branch_quota_bytes: \d+/, 'branch_quota_bytes: 65536');
    await d.pushToMain({ '.nas/limits.yaml': limits });
    expect((await d.nas('branch', 'create', 'demo/small')).code).toBe(0);
    const p = (rel: string) => d.path('demo@small', rel);
    await fs.writeFile(p('outbox/fits.bin'), Buffer.alloc(40_000, 1));
    expect(await codeOf(fs.writeFile(p('outbox/too-big.bin'), Buffer.alloc(40_000, 2)))).toBe('EDQUOT');
    // A streaming writer meets the quota mid-file, as dd shows it. (workspace/ is the disk itself, served
    // without the daemon: its bytes count in nas branch list, not at the syscall.)
    const dd = await run('dd', ['if=/dev/zero', `of=${p('outbox/stream.bin')}`, 'bs=64k', 'count=4']);
    expect(dd.stderr).toMatch(/Disk quota exceeded/);
    // Freeing space makes room again; what fit is intact and committed.
    await fs.unlink(p('outbox/too-big.bin'));
    await fs.unlink(p('outbox/stream.bin'));
    await fs.writeFile(p('outbox/small.md'), 'ok\n');
    await d.sync('demo/small');
    expect((await d.gitBlob('small:outbox/fits.bin')).equals(Buffer.alloc(40_000, 1))).toBe(true);
    expect((await d.gitBlob('small:outbox/small.md')).toString()).toBe('ok\n');
  });

  it('holds all branches of a Home to home_quota_bytes together, and refuses a branch past max_branches', async () => {
    // The first test's branch holds some bytes already: the Home's quota leaves 110,000 beside them.
    const small = (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'small').quota.used as number;
    const limits = (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8'))
      .replace(/home_quota_bytes: \d+/, `home_quota_bytes: ${small + 110_000}`).replace(/max_branches: \d+/, 'max_branches: 3');
    await d.pushToMain({ '.nas/limits.yaml': limits });
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).includes('max_branches: 3'), 'main to show the limits');
    expect((await d.nas('branch', 'create', 'demo/pool-a')).code).toBe(0);
    expect((await d.nas('branch', 'create', 'demo/pool-b')).code).toBe(0);
    // pool-a fits under its own quota (65,536) and the Home's; pool-b would fit its own, not the Home's.
    await fs.writeFile(d.path('demo@pool-a', 'outbox/a.bin'), Buffer.alloc(60_000, 1));
    expect(await codeOf(fs.writeFile(d.path('demo@pool-b', 'outbox/b.bin'), Buffer.alloc(60_000, 2)))).toBe('EDQUOT');
    await fs.writeFile(d.path('demo@pool-b', 'outbox/b.bin'), Buffer.alloc(20_000, 2));
    // Discarding a branch gives its bytes back to the Home.
    expect((await d.nas('branch', 'discard', 'demo/pool-a')).code).toBe(0);
    await fs.writeFile(d.path('demo@pool-b', 'outbox/c.bin'), Buffer.alloc(40_000, 3));
    // small, pool-b, and one more make three: a fourth is refused, clearly, and nothing is made.
    expect((await d.nas('branch', 'create', 'demo/third')).code).toBe(0);
    const fourth = await d.nas('branch', 'create', 'demo/fourth');
    expect(fourth.code).toBe(1);
    expect(fourth.stderr).toMatch(/has 3 branches, the most its \.nas\/limits\.yaml allows \(max_branches: 3\)/);
    expect((await d.git('show-ref')).stdout).not.toMatch(/fourth/);
    for (const b of ['pool-b', 'third']) expect((await d.nas('branch', 'discard', `demo/${b}`)).code).toBe(0);
    await d.pushToMain({ '.nas/limits.yaml': limits.replace(/home_quota_bytes: \d+/, 'home_quota_bytes: 21474836480').replace(/max_branches: \d+/, 'max_branches: 100') });
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).includes('max_branches: 100'), 'main to show the limits');
  });

  it('applies the strictest defaults when policy.yaml is malformed, reports it, and keeps serving', async () => {
    await d.pushToMain({ '.nas/policy.yaml': 'version: 1\nread_only: [".nas/**"\nappend_only: {\n' });
    await eventually(async () => {
      const homes = await d.nasJson<any[]>('home', 'list');
      return homes[0].problems.some((p: string) => /policy\.yaml: malformed YAML at line \d+/.test(p));
    }, 'problem reported');
    const list = await d.nas('home', 'list');
    expect(list.stdout).toMatch(/warning: demo: .nas\/policy.yaml: malformed YAML at line/);
    expect((await d.nas('branch', 'create', 'demo/strict')).code).toBe(0);
    const p = (rel: string) => d.path('demo@strict', rel);
    await fs.writeFile(p('outbox/ok.md'), 'ok\n');
    expect(await codeOf(fs.writeFile(p('.nas/policy.yaml'), 'x'))).toBe('EPERM');
    await fs.appendFile(p('memory/journal/j.md'), 'a\n');
    expect(await codeOf(fs.writeFile(p('memory/journal/j.md'), 'b\n'))).toBe('EPERM');
    expect(d.log).toMatch(/policy\.yaml: malformed YAML/);
  });

  it('adds read-only and append-only paths from a valid policy.yaml, without dropping the built-in ones', async () => {
    await d.pushToMain({ '.nas/policy.yaml': 'version: 1\nread_only:\n  - "skills/**"\nappend_only:\n  - "outbox/ledger.md"\n' });
    await eventually(async () => (await d.nasJson<any[]>('home', 'list'))[0].problems.length === 0, 'policy accepted');
    expect((await d.nas('branch', 'create', 'demo/custom')).code).toBe(0);
    const p = (rel: string) => d.path('demo@custom', rel);
    expect(await codeOf(fs.writeFile(p('skills/x.md'), 'x'))).toBe('EPERM');
    expect(await codeOf(fs.writeFile(p('.nas/role.yaml'), 'x'))).toBe('EPERM');
    await fs.appendFile(p('outbox/ledger.md'), 'one\n');
    expect(await codeOf(fs.writeFile(p('outbox/ledger.md'), 'two\n'))).toBe('EPERM');
    expect(await codeOf(fs.unlink(p('memory/journal/README.md')))).toBe('EPERM');
  });

  it('fails closed: a malformed policy.yaml keeps the last valid one in force, and says so', async () => {
    await d.pushToMain({ '.nas/policy.yaml': 'version: 1\nread_only: ["skills/**"\n' });
    const problems = await eventually(async () => {
      const found = (await d.nasJson<any[]>('home', 'list'))[0].problems as string[];
      return found.some((x) => /policy\.yaml: malformed YAML/.test(x)) && found;
    }, 'problem reported');
    expect(problems.join('\n')).toMatch(/policy\.yaml: the last valid version \(commit [0-9a-f]{12}\) stays in force/);
    expect((await d.nas('branch', 'create', 'demo/closed')).code).toBe(0);
    const p = (rel: string) => d.path('demo@closed', rel);
    // The operator's stricter rules from the last valid policy still hold, not the looser defaults.
    expect(await codeOf(fs.writeFile(p('skills/x.md'), 'x'))).toBe('EPERM');
    await fs.appendFile(p('outbox/ledger.md'), 'three\n');
    expect(await codeOf(fs.writeFile(p('outbox/ledger.md'), 'four\n'))).toBe('EPERM');
  });

  it('changes .nas/ the supported way: checked, proposed on its own branch, merged only when the owner approves', async () => {
    const bad = await run(process.execPath, [path.resolve(import.meta.dirname, '../../dist/src/cli/main.js'), '--socket', d.socket,
      'home', 'config', 'demo', '.nas/policy.yaml'], { env: { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token` }, input: 'version: 1\nread_only: ["x"\n' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/would not read whole; nothing was proposed/);
    const policy = 'version: 1\nread_only:\n  - "outbox/frozen.md"\n';
    await fs.writeFile(`${d.dir}/policy.yaml`, policy);
    const pr = await d.nasJson('home', 'config', 'demo', '.nas/policy.yaml', '--from', `${d.dir}/policy.yaml`, '--intent', 'freeze outbox/frozen');
    expect(pr.state).toBe('waiting');
    expect(pr.reasons.join(' ')).toMatch(/changes Home metadata: \.nas\/policy\.yaml/);
    expect((await d.gitBlob('main:.nas/policy.yaml')).toString()).not.toBe(policy);
    expect((await d.nasJson('pr', 'approve', 'demo', String(pr.id))).state).toBe('merged');
    expect((await d.gitBlob('main:.nas/policy.yaml')).toString()).toBe(policy);
    expect((await d.nas('branch', 'create', 'demo/frozen')).code).toBe(0);
    expect(await codeOf(fs.writeFile(d.path('demo@frozen', 'outbox/frozen.md'), 'x'))).toBe('EPERM');
  });
});
