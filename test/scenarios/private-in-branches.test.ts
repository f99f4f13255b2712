import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, run } from '../helpers.js';

/**
 * What the owner keeps to itself in main stays its own in a branch (security, third round, items 3 and 4): a
 * write-lease principal gets main's private file neither through a conflict of `nas branch update` nor by moving
 * the owner's private file into the shared inbox. Real users (setpriv), real FUSE, real git.
 */
const AGENT = 4262;
const asAgent = (script: string) => run('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', 'sh', '-c', script]);

describe("the owner's private files, in a principal's branch", () => {
  let d: TestDaemon;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const nasOk = async (...args: string[]) => {
    const r = await d.nas(...args);
    expect(r.code, `nas ${args.join(' ')}: ${r.stderr}`).toBe(0);
    return r.stdout.trim();
  };
  const leaseFor = (branch: string) => nasOk('lease', 'issue', `demo/${branch}`, '--principal', String(AGENT), '--ttl', '1h');
  const asLease = (token: string, ...args: string[]) => d.nasWith({ NAS_LEASE: token, owner: false }, ...args);

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    // The test's temporary directory is private to root; the agent needs to reach the mount inside it.
    await fs.chmod(d.dir, 0o755);
    // Branches forked before main has the secret: the agent's file of the same name is an add/add conflict.
    for (const b of ['mine', 'mine-by-owner', 'box']) await nasOk('branch', 'create', `demo/${b}`);
    // The owner's private file reaches main the reviewed way: written 0600 in a branch, proposed, approved.
    await nasOk('branch', 'create', 'demo/secret');
    await fs.writeFile(p('secret', 'outbox/secret.md'), 'top secret\n', { mode: 0o600 });
    await fs.chmod(p('secret', 'outbox/secret.md'), 0o600);
    const proposed = JSON.parse(await nasOk('--json', 'propose', 'demo/secret', '--into', 'main', '--intent', 'a private note'));
    if (proposed.state !== 'merged') await nasOk('pr', 'approve', 'demo', String(proposed.id));
    expect((await d.gitBlob('main:outbox/secret.md')).toString()).toBe('top secret\n');
    expect((await asAgent(`cat ${d.path('demo', 'outbox/secret.md')}`)).stderr).toMatch(/Permission denied/);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it("keeps main's side of a conflict out of the branch when its principal could not read it in main", async () => {
    const token = await leaseFor('mine');
    expect((await asAgent(`echo mine > ${p('mine', 'outbox/secret.md')}`)).code).toBe(0);
    const r = await asLease(token, '--json', 'branch', 'update', 'demo/mine');
    const out = JSON.parse(r.stdout);
    expect(out.conflicts).toEqual([expect.objectContaining({ path: 'outbox/secret.md', resolution: 'kept-branch', why: expect.stringMatching(/not yours to read/) })]);
    const read = await asAgent(`cat ${p('mine', 'outbox/secret.md')}`);
    expect(read.stdout).toBe('mine\n');
    expect((await d.gitBlob('mine:outbox/secret.md')).toString()).toBe('mine\n');
    // Nothing of main's content anywhere in what the branch now holds.
    expect((await d.git('grep', '-c', 'top secret', 'mine')).stdout).toBe('');
    // Picking the branch's side files main's in the recycle area, as private as it was: not shown to the agent,
    // not restorable by it (the owner sees it).
    const kept = await asLease(token, 'branch', 'resolve', 'demo/mine', 'outbox/secret.md', '--take', 'branch');
    expect(kept.code, kept.stderr).toBe(0);
    const owners = await d.nasJson<{ id: string; path: string; branch: string }[]>('trash', 'list', 'demo');
    const filed = owners.find((t) => t.branch === 'mine' && t.path === 'outbox/secret.md');
    expect(filed).toBeDefined();
    const theirs = JSON.parse((await asLease(token, '--json', 'trash', 'list', 'demo')).stdout) as { path: string; branch: string }[];
    expect(theirs.some((t) => t.branch === 'mine' && t.path === 'outbox/secret.md')).toBe(false);
    const restore = await asLease(token, 'trash', 'restore', 'demo', '--id', filed!.id, '--branch', 'mine', '--to', 'outbox/got-it.md');
    expect(restore.code).not.toBe(0);
    expect((await asAgent(`cat ${p('mine', 'outbox/got-it.md')}`)).stdout).toBe('');
  });

  it('gives a file that holds both sides the stricter of the two records (the owner updated it)', async () => {
    await leaseFor('mine-by-owner');
    expect((await asAgent(`echo mine > ${p('mine-by-owner', 'outbox/secret.md')}`)).code).toBe(0);
    // Exit 1: a file holds markers to edit away.
    const r = await d.nas('--json', 'branch', 'update', 'demo/mine-by-owner');
    expect(r.code, r.stderr).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out.conflicts).toEqual([expect.objectContaining({ path: 'outbox/secret.md', resolution: 'markers' })]);
    // The owner reads both sides; the file is main's owner's and as private as main's was.
    const st = await fs.stat(p('mine-by-owner', 'outbox/secret.md'));
    expect([st.uid, st.mode & 0o777]).toEqual([0, 0o600]);
    expect(await fs.readFile(p('mine-by-owner', 'outbox/secret.md'), 'utf8')).toMatch(/mine\n=======\ntop secret\n/);
    expect((await asAgent(`cat ${p('mine-by-owner', 'outbox/secret.md')}`)).stderr).toMatch(/Permission denied/);
  });

  it("shares in the inbox only what the owner lets everyone read: a 0600 file moved there stays the owner's", async () => {
    await leaseFor('box');
    await fs.writeFile(p('box', 'outbox/private.md'), 'owner only\n', { mode: 0o600 });
    await fs.chmod(p('box', 'outbox/private.md'), 0o600);
    await fs.writeFile(p('box', 'outbox/open.md'), 'for all\n', { mode: 0o644 });
    expect((await asAgent(`cat ${p('box', 'outbox/private.md')}`)).stderr).toMatch(/Permission denied/);
    // The agent may move the owner's files (it shares the owner's rights on the folders), but not read the private one.
    const moved = await asAgent(`mv ${p('box', 'outbox/private.md')} ${p('box', 'inbox/private.md')} && mv ${p('box', 'outbox/open.md')} ${p('box', 'inbox/open.md')}`);
    expect(moved.code, moved.stderr).toBe(0);
    expect((await asAgent(`cat ${p('box', 'inbox/private.md')}`)).stderr).toMatch(/Permission denied/);
    expect((await asAgent(`cat ${p('box', 'inbox/open.md')}`)).stdout).toBe('for all\n');
    expect((await asAgent(`cat ${p('box', 'inbox/README.md')} > /dev/null && echo read`)).stdout).toBe('read\n');
    // The inbox still shows as its owner's alone.
    expect((await fs.stat(p('box', 'inbox/private.md'))).mode & 0o777).toBe(0o600);
    expect((await fs.stat(p('box', 'inbox/open.md'))).mode & 0o777).toBe(0o660);
  });
});
