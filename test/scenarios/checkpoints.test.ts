import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';

/** Checkpoints name a commit for good; restore returns a branch to one as a new commit, recycling what it replaces. */
describe('checkpoints and restore', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@work', rel);

  beforeAll(async () => {
    d = await TestDaemon.withBranch('work');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('takes a checkpoint of a branch (pending work included) that no lease can move or delete', async () => {
    await fs.writeFile(p('outbox/a.md'), 'version one\n');
    await fs.writeFile(p('outbox/b.md'), 'b one\n');
    const cp = await d.nasJson('checkpoint', 'create', 'demo@work', 'safe', '--message', 'before the refactor');
    expect(cp).toMatchObject({ name: 'safe', branch: 'work', message: 'before the refactor' });
    expect((await d.gitBlob(`${cp.commit}:outbox/a.md`)).toString()).toBe('version one\n');
    expect((await d.git('rev-parse', 'refs/nas/checkpoints/safe')).stdout.trim()).toBe(cp.commit);
    const again = await d.nas('checkpoint', 'create', 'demo@work', 'safe');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/exists already \(checkpoints never move\)/);
    // A lease holder may make one of its branch, but not delete any.
    const token = (await d.nas('lease', 'issue', 'demo/work', '--principal', 'nobody')).stdout.trim();
    const byLease = await d.nasWith({ NAS_LEASE: token, owner: false }, 'checkpoint', 'create', 'demo@work', 'lease-made');
    expect(byLease.code, byLease.stderr).toBe(0);
    const del = await d.nasWith({ NAS_LEASE: token, owner: false }, 'checkpoint', 'delete', 'demo', 'safe');
    expect(del.code).toBe(1);
    expect(del.stderr).toMatch(/owner action/);
    expect((await d.nasJson<any[]>('checkpoint', 'list', 'demo')).map((c) => c.name)).toEqual(['safe', 'lease-made']);
    const main = await d.nasWith({ NAS_LEASE: token, owner: false }, 'checkpoint', 'create', 'demo', 'main-cp');
    expect(main.code).toBe(1);
  });

  it('restores a branch to a checkpoint as a new commit; what it replaces goes to the recycle area', async () => {
    await fs.writeFile(p('outbox/a.md'), 'version two, broken\n');
    await fs.unlink(p('outbox/b.md'));
    await fs.writeFile(p('outbox/c.md'), 'added after\n');
    await d.sync('demo/work');
    const before = (await d.git('rev-parse', 'work')).stdout.trim();
    const r = await d.nasJson('restore', 'demo@work', 'safe');
    expect(r.restored.sort()).toEqual(['outbox/a.md', 'outbox/b.md']);
    expect(r.removed).toEqual(['outbox/c.md']);
    expect(r.refused).toEqual([]);
    expect(await fs.readFile(p('outbox/a.md'), 'utf8')).toBe('version one\n');
    expect(await fs.readFile(p('outbox/b.md'), 'utf8')).toBe('b one\n');
    // The kernel may show a name for up to a second after a change made outside the mount (docs/architecture.md).
    await eventually(async () => fs.access(p('outbox/c.md')).then(() => false, () => true), 'c.md to be gone from the view');
    // Nothing rewritten: the broken version is the parent's, and the replaced files are in the recycle area.
    expect((await d.git('merge-base', '--is-ancestor', before, 'work')).code).toBe(0);
    const trash = await d.nasJson<any[]>('trash', 'list', 'demo');
    expect(trash).toContainEqual(expect.objectContaining({ path: 'outbox/c.md', branch: 'work' }));
    expect(trash).toContainEqual(expect.objectContaining({ path: 'outbox/a.md', branch: 'work' }));
  });

  it('restores only the paths asked for, from a commit id too, and never main', async () => {
    const first = (await d.nasJson<any[]>('checkpoint', 'list', 'demo'))[0].commit as string;
    await fs.writeFile(p('outbox/a.md'), 'changed again\n');
    await fs.writeFile(p('memory/notes/n.md'), '---\ndescription: x\n---\nnote\n');
    await d.sync('demo/work');
    const r = await d.nasJson('restore', 'demo@work', first.slice(0, 12), '--path', 'outbox');
    expect(r.restored).toEqual(['outbox/a.md']);
    expect(await fs.readFile(p('memory/notes/n.md'), 'utf8')).toMatch(/note/);
    const onMain = await d.nas('restore', 'demo', 'safe');
    expect(onMain.code).toBe(2);
    const unknown = await d.nas('restore', 'demo@work', 'no-such-checkpoint');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no checkpoint or commit "no-such-checkpoint"/);
  });

  it('shows each checkpoint read-only at <role>:<name> under the mount', async () => {
    expect(await fs.readdir(d.mnt)).toContain('demo:safe');
    expect(await fs.readFile(d.path('demo:safe', 'outbox/a.md'), 'utf8')).toBe('version one\n');
    expect(await codeOf(fs.writeFile(d.path('demo:safe', 'outbox/a.md'), 'x'))).toBe('EROFS');
    expect(await codeOf(fs.unlink(d.path('demo:safe', 'outbox/b.md')))).toBe('EROFS');
    expect((await run('grep', ['-r', 'b one', d.path('demo:safe', 'outbox')])).stdout).toMatch(/b\.md/);
  });

  it('shows any commit by id at <role>:<commit>, read-only, without listing it; checkpoint names never look like ids', async () => {
    const log = await d.nasJson<any[]>('log', 'demo@work', 'outbox/a.md');
    const oldest = log[log.length - 1].commit as string;
    const expected = (await d.gitBlob(`${oldest}:outbox/a.md`)).toString();
    for (const id of [oldest.slice(0, 7), oldest]) {
      expect(await fs.readFile(d.path(`demo:${id}`, 'outbox/a.md'), 'utf8')).toBe(expected);
      expect(await codeOf(fs.writeFile(d.path(`demo:${id}`, 'outbox/new.md'), 'x'))).toBe('EROFS');
    }
    expect((await run('ls', [d.path(`demo:${oldest.slice(0, 9)}`, 'outbox')])).stdout).toMatch(/a\.md/);
    expect(await fs.readdir(d.mnt)).not.toContain(`demo:${oldest.slice(0, 7)}`);
    expect(await codeOf(fs.stat(d.path('demo:0000000000')))).toBe('ENOENT');
    expect(await codeOf(fs.stat(d.path('demo:not-a-commit')))).toBe('ENOENT');
    const hexName = await d.nas('checkpoint', 'create', 'demo@work', 'cafe1234');
    expect(hexName.code).toBe(1);
    expect(hexName.stderr).toMatch(/reads as a commit id/);
  });

  it('lets the owner delete a checkpoint; the commit stays in history', async () => {
    const gone = await d.nasJson('checkpoint', 'delete', 'demo', 'lease-made');
    expect((await d.git('cat-file', '-t', gone.commit)).stdout.trim()).toBe('commit');
    expect((await d.nasJson<any[]>('checkpoint', 'list', 'demo')).map((c) => c.name)).toEqual(['safe']);
    await eventually(async () => !(await fs.readdir(d.mnt)).includes('demo:lease-made'), 'the view to go');
  });

  it('shows history with who and why, and diffs between checkpoints, commits and the fork point', async () => {
    const log = await d.nasJson<any[]>('log', 'demo@work', 'outbox/a.md');
    expect(log.length).toBeGreaterThanOrEqual(3);
    expect(log.every((e) => e.trailers['Nas-Branch'] === 'work')).toBe(true);
    expect(log[0].subject).toMatch(/outbox\/a\.md/);
    const human = await d.nas('log', 'demo@work', '--limit', '2');
    expect(human.code).toBe(0);
    expect(human.stdout.trim().split('\n').filter((l) => /^[0-9a-f]{12}  /.test(l))).toHaveLength(2);
    const fork = await d.nasJson('diff', 'demo@work', '--path', 'outbox');
    expect(fork.changes.map((c: any) => c.path)).toContain('outbox/a.md');
    expect(fork.patch).toMatch(/^diff --git a\/outbox\/a\.md/m);
    expect(fork.patch).not.toMatch(/memory\/notes/);
    const between = await d.nasJson('diff', 'demo@work', 'safe', log[0].commit.slice(0, 10));
    expect(between.changes).toContainEqual({ path: 'memory/notes/n.md', status: 'added' });
    const bad = await d.nas('diff', 'demo@work', 'nowhere');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/no checkpoint or commit "nowhere"/);
  });

  it('purges the recycle area of what is older than asked (owner only), and git packs what is loose', async () => {
    const before = await d.nasJson<any[]>('trash', 'list', 'demo');
    expect(before.length).toBeGreaterThan(0);
    const token = (await d.nas('lease', 'issue', 'demo/work', '--principal', 'nobody')).stdout.trim();
    const refused = await d.nasWith({ NAS_LEASE: token, owner: false }, 'trash', 'purge', 'demo', '--older-than', '1s');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/owner action/);
    // What was deleted before is at least 5 s old at the purge; what is deleted now, younger (a margin for a loaded machine).
    await new Promise((r) => setTimeout(r, 5100));
    await fs.writeFile(p('outbox/fresh.md'), 'fresh\n');
    await d.sync('demo/work');
    await fs.unlink(p('outbox/fresh.md'));
    await d.sync('demo/work');
    const purged = await d.nasJson('trash', 'purge', 'demo', '--older-than', '5s');
    expect(purged.purged.length).toBe(before.length);
    const after = await d.nasJson<any[]>('trash', 'list', 'demo');
    expect(after.map((t) => t.path)).toEqual(['outbox/fresh.md']);
    // The recycle area's history starts again, so what went is unreachable from it.
    expect((await d.git('rev-list', '--count', 'refs/nas/trash')).stdout.trim()).toBe('1');
    expect((await d.git('fsck', '--no-dangling')).code).toBe(0);
  });
});
