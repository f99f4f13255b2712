import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
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

/**
 * A forward jump of the wall clock used to expire a branch and remove it in the same pass, its scratch with it.
 * The machine's clock is not stepped (that needs CAP_SYS_TIME and moves every process's clock): nasd's TTL clock
 * is, through its hidden test flag, which adds the milliseconds in a file to the wall clock TTLs are read on.
 */
describe('branch TTL across a clock jump', () => {
  let d: TestDaemon;
  let dir: string;
  const DAY = 86_400_000;
  const stepClock = (ms: number) => fs.writeFile(`${dir}/offset`, String(ms));
  /** One whole TTL pass (nas maintenance run waits for a running one, then makes its own), with what it removed. */
  const pass = async () => (await d.nasJson<any[]>('maintenance', 'run', 'demo'))[0].discarded as string[];
  const listed = async () => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'jump');

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-clock-'));
    await stepClock(0);
    d = await TestDaemon.start({ extraArgs: ['--demo', '--test-clock-offset-file', `${dir}/offset`] });
  });
  afterAll(async () => {
    await d?.cleanup();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  it('never expires and removes a branch in one pass: it and its scratch stay a full grace period, however far the clock jumps', async () => {
    expect((await d.nas('branch', 'create', 'demo/jump', '--ttl', '1h')).code).toBe(0);
    const p = (rel: string) => d.path('demo@jump', rel);
    await fs.writeFile(p('workspace/notes.txt'), 'scratch, never committed\n');
    await fs.writeFile(p('outbox/kept.md'), 'kept\n');
    await d.sync('demo/jump');
    // Past the TTL (1 h) and the default grace period (7 days) at once.
    await stepClock(8 * DAY);
    expect(await pass()).toEqual([]);
    expect(await pass()).toEqual([]);
    expect(await listed()).toMatchObject({ expired: true });
    expect(await fs.readFile(p('workspace/notes.txt'), 'utf8')).toBe('scratch, never committed\n');
    expect(await codeOf(fs.writeFile(p('outbox/late.md'), 'late\n'))).toBe('EROFS');
    // Expired, in its grace period, and the clock jumps past that too: the grace period starts again.
    await stepClock(16 * DAY);
    expect(await pass()).toEqual([]);
    expect(await pass()).toEqual([]);
    expect(await listed()).toMatchObject({ expired: true });
    expect(await fs.readFile(p('workspace/notes.txt'), 'utf8')).toBe('scratch, never committed\n');
    expect(d.log).toMatch(/the wall clock jumped forward: expired branches keep a full grace period from now/);
  });
});
