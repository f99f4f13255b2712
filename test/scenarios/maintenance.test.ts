import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, eventually, run } from '../helpers.js';

/** nas maintenance run: the recycle window, stale PRs and a git pack, reported; nothing reachable is ever lost. The Store's push guard. */
describe('maintenance and the Store\'s push guard', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@work', rel);

  beforeAll(async () => {
    d = await TestDaemon.withBranch('work');
    // A window of about 4.3 s, so a test can see one deletion inside it and one outside.
    const maintenance = (await fs.readFile(d.path('demo', '.nas/maintenance.yaml'), 'utf8')).replace(/trash_keep_days: \d+/, 'trash_keep_days: 0.00005');
    await d.pushToMain({ '.nas/maintenance.yaml': maintenance });
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/maintenance.yaml'), 'utf8')).includes('0.00005'), 'main to show the window');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('purges only what is past the window, expires PRs of removed branches, packs the Store, keeps checkpoints', async () => {
    // Loose objects: many small commits.
    for (let i = 0; i < 30; i++) await fs.writeFile(p(`outbox/f${i}.md`), `file ${i}\n`);
    await fs.writeFile(p('outbox/old.md'), 'deleted long ago\n');
    await d.sync('demo/work');
    await fs.unlink(p('outbox/old.md'));
    await d.sync('demo/work');
    // A checkpoint of a branch that is then discarded: only the checkpoint keeps that commit.
    expect((await d.nas('branch', 'create', 'demo/kept')).code).toBe(0);
    await fs.writeFile(d.path('demo@kept', 'outbox/only-here.md'), 'kept by a checkpoint\n');
    const cp = await d.nasJson('checkpoint', 'create', 'demo@kept', 'keep-me');
    // A PR that waits (it edits AGENTS.md), then its branch goes.
    await fs.appendFile(d.path('demo@kept', 'AGENTS.md'), '\nA rule.\n');
    const pr = await d.nasJson('propose', 'demo/kept', '--into', 'main', '--intent', 'wait for me');
    expect(pr.state).toBe('waiting');
    expect((await d.nas('branch', 'discard', 'demo/kept')).code).toBe(0);
    await new Promise((r) => setTimeout(r, 5000));
    await fs.writeFile(p('outbox/recent.md'), 'deleted just now\n');
    await d.sync('demo/work');
    await fs.unlink(p('outbox/recent.md'));
    await d.sync('demo/work');

    const token = (await d.nas('lease', 'issue', 'demo/work', '--principal', 'nobody')).stdout.trim();
    const byLease = await d.nasWith({ NAS_LEASE: token, owner: false }, 'maintenance', 'run', 'demo');
    expect(byLease.code).toBe(1);
    expect(byLease.stderr).toMatch(/owner action/);

    const [report] = await d.nasJson<any[]>('maintenance', 'run', 'demo');
    expect(report.role).toBe('demo');
    expect(report.purged).toBeGreaterThan(0);
    // Its PR expired when its branch was discarded: nothing was left for the maintenance run.
    expect(report.expiredPrs).toEqual([]);
    expect(report.objects.before.loose).toBeGreaterThan(30);
    expect(report.objects.after.loose).toBeLessThan(report.objects.before.loose);
    expect(report.objects.after.packed).toBeGreaterThan(0);
    const trash = (await d.nasJson<any[]>('trash', 'list', 'demo')).map((t) => t.path);
    expect(trash).toContain('outbox/recent.md');
    expect(trash).not.toContain('outbox/old.md');
    expect(await d.nasJson('pr', 'show', 'demo', String(pr.id))).toMatchObject({ state: 'expired', reasons: expect.arrayContaining(['its branch kept was discarded']) });
    // Reachable from a checkpoint, main and a live branch: all still there, and git finds nothing broken.
    expect((await d.gitBlob(`${cp.commit}:outbox/only-here.md`)).toString()).toBe('kept by a checkpoint\n');
    expect((await d.gitBlob('work:outbox/f29.md')).toString()).toBe('file 29\n');
    expect((await d.git('fsck', '--no-dangling')).code).toBe(0);
    expect(await fs.readFile(d.path('demo:keep-me', 'outbox/only-here.md'), 'utf8')).toBe('kept by a checkpoint\n');
    // The human form names the Home and what changed.
    const human = await d.nas('maintenance', 'run');
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^HOME\s+PURGED/);
    expect(human.stdout).toMatch(/^demo\s/m);
    const unknown = await d.nas('maintenance', 'run', 'nobody-home');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no Home named "nobody-home"/);
  });

  it('refuses a git push to main, to nasd\'s records or to a live branch, and a new branch (it would have no record), naming nas branch create; the operator can override', async () => {
    const work = `${d.dir}/pusher`;
    const git = (env: Record<string, string>, ...args: string[]) =>
      run('git', ['-c', 'user.name=op', '-c', 'user.email=op@x', ...args], { cwd: work, env });
    expect((await run('git', ['clone', '-q', `${d.state}/homes/demo.git`, work])).code).toBe(0);
    await fs.writeFile(`${work}/outbox/pushed.md`, 'around the gate\n');
    expect((await git({}, 'add', '-A')).code).toBe(0);
    expect((await git({}, 'commit', '-qm', 'around the gate')).code).toBe(0);
    const before = (await d.git('rev-parse', 'main')).stdout.trim();
    const toMain = await git({}, 'push', '-q', 'origin', 'HEAD:main');
    expect(toMain.code).not.toBe(0);
    expect(toMain.stderr).toMatch(/refs\/heads\/main changes only through nasd \(nas propose, then nas pr approve\)/);
    expect((await d.git('rev-parse', 'main')).stdout.trim()).toBe(before);
    const toRecords = await git({}, 'push', '-q', 'origin', 'HEAD:refs/nas/trash');
    expect(toRecords.code).not.toBe(0);
    // A new branch would have no record, no TTL and no view: refused, with the way to make one.
    const toNew = await git({}, 'push', '-q', 'origin', 'HEAD:refs/heads/pushed');
    expect(toNew.code).not.toBe(0);
    expect(toNew.stderr).toMatch(/refs\/heads\/pushed would be a branch with no record, no TTL and no view/);
    expect(toNew.stderr).toMatch(/nas branch create demo\/pushed/);
    expect((await d.git('rev-parse', '--verify', '-q', 'refs/heads/pushed')).code).not.toBe(0);
    // A branch that exists is written through its view: a push there would stop the view's commits.
    const toLive = await git({}, 'push', '-q', '--force', 'origin', 'HEAD:refs/heads/work');
    expect(toLive.code).not.toBe(0);
    expect(toLive.stderr).toMatch(/refs\/heads\/work exists and is written through its view/);
    expect((await git({ NAS_OPERATOR_PUSH: '1' }, 'push', '-q', 'origin', 'HEAD:main')).code).toBe(0);
    await eventually(async () => (await fs.readFile(d.path('demo', 'outbox/pushed.md'), 'utf8').catch(() => '')) === 'around the gate\n', 'main to follow the override push');
  });
});
