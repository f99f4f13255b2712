import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, eventually } from '../helpers.js';

/** A branch's TTL is enforced: read-only when it passes, its leases and waiting PRs end, then it goes to the recycle area. */
describe('branch TTL', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    const limits = (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')) + 'branch_grace: 8s\n';
    await d.pushToMain({ '.nas/limits.yaml': limits });
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).includes('branch_grace'), 'main to show the limits');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('makes an expired branch read-only, ends its leases and waiting PRs, then recycles its work after the grace period', async () => {
    expect((await d.nas('branch', 'create', 'demo/brief', '--ttl', '4s')).code).toBe(0);
    const p = (rel: string) => d.path('demo@brief', rel);
    const lease = await d.nas('lease', 'issue', 'demo/brief', '--principal', 'nobody', '--ttl', '1h');
    expect(lease.code, lease.stderr).toBe(0);
    // A PR that waits at the Human Gate (it edits AGENTS.md), and a file still open when the TTL passes.
    await fs.appendFile(p('AGENTS.md'), '\nOne more rule.\n');
    await fs.writeFile(p('outbox/kept.md'), 'kept\n');
    const pr = await d.nasJson('propose', 'demo/brief', '--into', 'main', '--intent', 'before expiry');
    expect(pr.state).toBe('waiting');
    const open = await fs.open(p('outbox/open.md'), 'w');
    await open.write('written before\n');
    const expired = await eventually(async () => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'brief' && b.expired), 'the branch to expire', 15_000);
    expect(expired.expired).toBe(true);
    expect(await codeOf(fs.writeFile(p('outbox/late.md'), 'late\n'))).toBe('EROFS');
    expect(await codeOf(open.write('written after\n'))).toBe('EROFS');
    await open.close();
    expect(await codeOf(fs.writeFile(p('workspace/late.txt'), 'late\n'))).toBe('EROFS');
    expect(await fs.readFile(p('outbox/kept.md'), 'utf8')).toBe('kept\n');
    expect(d.log).toMatch(/branch expired: read-only now/);
    const leases = await d.nasJson<any[]>('lease', 'list', 'demo');
    expect(leases.filter((l) => l.branch === 'brief').map((l) => l.status)).toEqual(['revoked']);
    expect((await d.nasJson('pr', 'show', 'demo', String(pr.id))).state).toBe('expired');
    const again = await d.nas('propose', 'demo/brief', '--into', 'main', '--intent', 'after expiry');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/expired/);
    expect((await d.gitBlob('brief:outbox/open.md')).toString()).toBe('written before\n');
    // After the grace period the branch goes; its work is in the recycle area.
    await eventually(async () => !(await d.nasJson<any[]>('branch', 'list', 'demo')).some((b) => b.name === 'brief'), 'the branch to be removed', 20_000);
    const trash = await d.nasJson<any[]>('trash', 'list', 'demo');
    expect(trash).toContainEqual(expect.objectContaining({ path: 'outbox/kept.md', branch: 'brief' }));
    await expect(fs.access(p(''))).rejects.toThrow(/ENOENT/);
  });

  it('lets the owner extend a branch, also one that expired, which then takes writes again', async () => {
    expect((await d.nas('branch', 'create', 'demo/longer', '--ttl', '3s')).code).toBe(0);
    const p = (rel: string) => d.path('demo@longer', rel);
    await fs.writeFile(p('outbox/first.md'), 'first\n');
    await eventually(async () => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'longer')?.expired, 'the branch to expire', 15_000);
    expect(await codeOf(fs.writeFile(p('outbox/late.md'), 'late\n'))).toBe('EROFS');
    const token = (await d.nas('lease', 'issue', 'demo/longer', '--principal', 'nobody')).stdout.trim();
    const byLease = await d.nasWith({ NAS_LEASE: token, owner: false }, 'branch', 'extend', 'demo/longer', '--ttl', '1h');
    expect(byLease.code).toBe(1);
    expect(byLease.stderr).toMatch(/owner action/);
    expect((await d.nas('branch', 'extend', 'demo/longer')).code).toBe(2);
    expect((await d.nas('branch', 'extend', 'demo/longer', '--ttl', 'soon')).code).toBe(1);
    const r = await d.nasJson('branch', 'extend', 'demo/longer', '--ttl', '1h');
    expect(r.reopened).toBe(true);
    expect(Date.parse(r.expires) - Date.now()).toBeGreaterThan(3500_000);
    await fs.writeFile(p('outbox/late.md'), 'late\n');
    await fs.writeFile(p('workspace/scratch.txt'), 'scratch\n');
    await d.sync('demo/longer');
    expect((await d.gitBlob('longer:outbox/late.md')).toString()).toBe('late\n');
    // The periodic pass (every 5 s) leaves it alone now, past the old grace period too.
    await new Promise((res) => setTimeout(res, 9000));
    const listed = (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'longer');
    expect(listed).toMatchObject({ expired: false, ttl: '1h' });
  });
});
