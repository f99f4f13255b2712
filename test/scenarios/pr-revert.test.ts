import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { launchChromium, stopChromium, type Chromium } from '../browser.js';
import { ROOT, TestDaemon, eventually } from '../helpers.js';

/**
 * Undo after a merge (issue 31, item 10): `nas pr revert <role> <id>` and the merged PR page's Revert propose the
 * inverse of the PR's merge as a NEW PR from a branch revert-<id>, judged like any other (checks, policy, the Human
 * Gate); main is never written directly. Once that PR merges, main has the old content again, and what the revert
 * deletes is in the recycle area. A PR that did not merge, a revert main's later changes make unclean, and a caller
 * who is not the owner are refused, with why.
 */
describe('reverting a merged PR', () => {
  let d: TestDaemon;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const mainFile = async (rel: string) => (await d.gitBlob(`main:${rel}`).catch(() => null))?.toString() ?? null;
  const prOf = (id: number) => d.nasJson('pr', 'show', 'demo', String(id));
  const branchNames = async () => (await d.nasJson<{ name: string }[]>('branch', 'list', 'demo')).map((b) => b.name);
  /** A branch with `edit` done in it, proposed, and merged (approved when policy makes it wait). */
  const merged = async (name: string, intent: string, edit: () => Promise<void>) => {
    expect((await d.nas('branch', 'create', `demo/${name}`)).code).toBe(0);
    await edit();
    const pr = await d.nasJson('propose', `demo/${name}`, '--into', 'main', '--intent', intent);
    if (pr.state === 'waiting') expect((await d.nas('pr', 'approve', 'demo', String(pr.id))).code).toBe(0);
    expect((await prOf(pr.id)).state).toBe('merged');
    return pr.id as number;
  };

  let readmeBefore: string;
  let changed: number;

  beforeAll(async () => {
    d = await TestDaemon.withBranch('work');
    try {
      readmeBefore = (await mainFile('outbox/README.md'))!;
      changed = await merged('report', 'a report and a better readme', async () => {
        await fs.appendFile(p('report', 'outbox/README.md'), '\nReports go in outbox/reports/.\n');
        await fs.mkdir(p('report', 'outbox/reports'));
        await fs.writeFile(p('report', 'outbox/reports/q3.md'), '# Q3\n\nAll good.\n');
        await fs.writeFile(p('report', 'outbox/summary.md'), 'summary\n');
      });
    } catch (err) {
      await d.cleanup();
      throw err;
    }
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('proposes the undoing as a new PR that passes the gate; merged, main has the old content and the recycle area what it deleted', async () => {
    expect(await mainFile('outbox/reports/q3.md')).toBe('# Q3\n\nAll good.\n');
    const mainBefore = (await d.git('rev-parse', 'main')).stdout.trim();
    const r = await d.nas('--json', 'pr', 'revert', 'demo', String(changed));
    expect(r.code, r.stderr).toBe(0);
    const revert = JSON.parse(r.stdout);
    expect(revert).toMatchObject({ branch: `revert-${changed}`, reverts: changed, intent: `Revert PR ${changed}: a report and a better readme` });
    expect(revert.id).not.toBe(changed);
    // It deletes files, so main's policy makes it wait for a person, as it would any PR: main has not moved.
    expect(revert.state).toBe('waiting');
    expect(revert.reasons.join('\n')).toMatch(/deletes outbox\/reports\/q3\.md/);
    expect((await d.git('rev-parse', 'main')).stdout.trim()).toBe(mainBefore);
    expect(revert.changes).toMatchObject({ added: 0, modified: 1, deleted: 2 });
    // The branch shows the inverse through the mount, as any branch does.
    expect(await fs.readFile(p(`revert-${changed}`, 'outbox/README.md'), 'utf8')).toBe(readmeBefore);
    await expect(fs.stat(p(`revert-${changed}`, 'outbox/summary.md'))).rejects.toMatchObject({ code: 'ENOENT' });
    // Shown as what it reverts (text and --json).
    expect((await d.nas('pr', 'show', 'demo', String(revert.id))).stdout).toMatch(new RegExp(`reverts: PR ${changed}`));
    // A second revert while this one is undecided is refused, naming it.
    const twice = await d.nas('pr', 'revert', 'demo', String(changed));
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(new RegExp(`PR ${revert.id} \\(branch revert-${changed}\\) reverts PR ${changed} already and is waiting`));

    expect((await d.nas('pr', 'approve', 'demo', String(revert.id))).code).toBe(0);
    expect((await prOf(revert.id)).state).toBe('merged');
    expect(await mainFile('outbox/README.md')).toBe(readmeBefore);
    expect(await mainFile('outbox/reports/q3.md')).toBeNull();
    expect(await mainFile('outbox/summary.md')).toBeNull();
    expect(await fs.readFile(d.path('demo', 'outbox/README.md'), 'utf8')).toBe(readmeBefore);
    const trash = await d.nasJson<{ path: string; branch: string }[]>('trash', 'list', 'demo');
    for (const gone of ['outbox/reports/q3.md', 'outbox/summary.md']) expect(trash.some((t) => t.branch === 'main' && t.path === gone), gone).toBe(true);
    // Done: a second revert finds nothing of the PR left in main.
    const again = await d.nas('pr', 'revert', 'demo', String(changed));
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/main holds none of PR \d+'s changes any more/);
  });

  it('refuses a PR that did not merge, one that does not exist, and a caller who is not the owner', async () => {
    expect((await d.nas('branch', 'create', 'demo/drop')).code).toBe(0);
    await fs.unlink(p('drop', 'outbox/README.md'));
    const waiting = await d.nasJson('propose', 'demo/drop', '--into', 'main', '--intent', 'drop the readme');
    expect(waiting.state).toBe('waiting');
    const before = await branchNames();
    const notMerged = await d.nas('pr', 'revert', 'demo', String(waiting.id));
    expect(notMerged.code).toBe(1);
    expect(notMerged.stderr).toMatch(new RegExp(`PR ${waiting.id} is waiting, not merged: only a merged PR .* can be reverted`));
    const missing = await d.nas('pr', 'revert', 'demo', '999');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/Home demo has no PR 999/);
    const token = (await d.nas('lease', 'issue', 'demo/work', '--principal', 'agent', '--scopes', 'write,propose:main')).stdout.trim();
    const byLease = await d.nasWith({ NAS_LEASE: token, owner: false }, 'pr', 'revert', 'demo', String(changed));
    expect(byLease.code).toBe(1);
    expect(byLease.stderr).toMatch(/reverting a PR is an owner action/);
    expect(await branchNames()).toEqual(before);
  });

  it('refuses, naming the files, when main changed them since so the undoing does not apply cleanly; no branch is left', async () => {
    const first = await merged('plan', 'a plan', async () => {
      await fs.writeFile(p('plan', 'outbox/plan.md'), 'step one\nstep two\n');
    });
    await merged('plan2', 'a better plan', async () => {
      await fs.writeFile(p('plan2', 'outbox/plan.md'), 'step one, done\nstep two\n');
    });
    const before = await branchNames();
    const mainBefore = (await d.git('rev-parse', 'main')).stdout.trim();
    const r = await d.nas('pr', 'revert', 'demo', String(first));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`PR ${first} cannot be reverted cleanly: main changed a file it changed since it merged \\(outbox/plan\\.md\\)`));
    expect(await branchNames()).toEqual(before);
    expect((await d.git('rev-parse', 'main')).stdout.trim()).toBe(mainBefore);
  });

  it('makes one revert of two asked at once (two clicks): the other is told one is on its way, and no second branch is left', async () => {
    const id = await merged('twice', 'a note', async () => {
      await fs.writeFile(p('twice', 'outbox/note.md'), 'a note\n');
    });
    const [a, b] = await Promise.all([d.nas('pr', 'revert', 'demo', String(id)), d.nas('pr', 'revert', 'demo', String(id))]);
    expect([a.code, b.code].sort()).toEqual([0, 1]);
    const refused = a.code === 1 ? a : b;
    expect(refused.stderr).toMatch(new RegExp(`a revert of PR ${id} is being proposed right now|reverts PR ${id} already`));
    const names = await branchNames();
    expect(names).toContain(`revert-${id}`);
    expect(names).not.toContain(`revert-${id}-2`);
    const reverts = (await d.nasJson<{ id: number; reverts?: number }[]>('pr', 'list', 'demo')).filter((r) => r.reverts === id);
    expect(reverts).toHaveLength(1);
    expect((await d.nas('pr', 'reject', 'demo', String(reverts[0].id), '--why', 'kept')).code).toBe(0);
  });

  describe('on the web page', () => {
    let chrome: Chromium | undefined;
    let page: Page;

    beforeAll(async () => {
      chrome = await launchChromium();
      page = await (await chrome.browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
      await page.goto((await d.nasJson('web', 'open')).url);
    });
    afterAll(async () => {
      await stopChromium(chrome);
    });

    it('gives a merged PR a Revert that opens the new PR; it links back, and merged, main has the old content', async () => {
      const id = await merged('notes', 'meeting notes', async () => {
        await fs.writeFile(p('notes', 'outbox/meeting.md'), 'we met\n');
        await fs.appendFile(p('notes', 'outbox/README.md'), '\nMeeting notes too.\n');
      });
      const readme = await mainFile('outbox/README.md');
      const base = new URL(page.url()).origin;
      await page.goto(`${base}/pr/demo/${id}`);
      await page.waitForSelector('.decided.merged');
      // A PR that waits has no Revert; this merged one has, and it asks first.
      await page.locator('button.revert').click();
      const confirm = page.locator('.confirm');
      expect(await confirm.textContent()).toMatch(new RegExp(`undoes PR ${id}'s 2 files .*revert-${id}`));
      const mainBefore = (await d.git('rev-parse', 'main')).stdout.trim();
      await confirm.locator('button.confirm-revert').click();
      await page.waitForURL((url) => /^\/pr\/demo\/\d+$/.test(url.pathname) && url.pathname !== `/pr/demo/${id}`);
      const revertId = Number(new URL(page.url()).pathname.split('/').pop());
      expect(revertId).not.toBe(id);
      await page.waitForSelector('h1.intent');
      expect(await page.locator('h1.intent').textContent()).toBe(`Revert PR ${id}: meeting notes`);
      expect(await page.locator('.meta .reverts a').getAttribute('href')).toBe(`/pr/demo/${id}`);
      expect((await d.git('rev-parse', 'main')).stdout.trim()).toBe(mainBefore);
      expect((await prOf(revertId)).state).toBe('waiting');
      // The same gate: approved on the page, it merges.
      await page.locator('button.approve').click();
      await page.locator('.confirm button.confirm-merge').click();
      await eventually(async () => (await prOf(revertId)).state === 'merged', 'the revert to merge');
      expect(await mainFile('outbox/meeting.md')).toBeNull();
      expect(await mainFile('outbox/README.md')).not.toBe(readme);
      expect(await mainFile('outbox/README.md')).not.toContain('Meeting notes too.');
      // The PR it undid says so, with a link.
      await page.goto(`${base}/pr/demo/${id}`);
      await page.waitForSelector('.reverted:not([hidden])');
      expect(await page.locator('.reverted').textContent()).toBe(`Reverted by PR ${revertId} (merged)`);
      // Undone already: no second Revert is offered.
      expect(await page.locator('button.revert').isVisible()).toBe(false);
      await page.screenshot({ path: `${ROOT}/test-output/web-pr-reverted.png`, fullPage: true });
      // A waiting PR offers no Revert.
      const waiting = (await d.nasJson<any[]>('pr', 'inbox')).find((x) => x.home === 'demo' && x.state === 'waiting');
      await page.goto(`${base}/pr/demo/${waiting.id}`);
      await page.waitForSelector('button.approve');
      expect(await page.locator('button.revert').count()).toBe(0);
    });

    it('says why on the page when a revert is refused', async () => {
      const conflicted = (await d.nasJson<any[]>('pr', 'list', 'demo')).find((x) => x.intent === 'a plan');
      const base = new URL(page.url()).origin;
      await page.goto(`${base}/pr/demo/${conflicted.id}`);
      await page.locator('button.revert').click();
      await page.locator('button.confirm-revert').click();
      await page.waitForSelector('.notice.error');
      expect(await page.locator('.notice').textContent()).toMatch(/cannot be reverted cleanly: .*\(outbox\/plan\.md\)/);
      expect(new URL(page.url()).pathname).toBe(`/pr/demo/${conflicted.id}`);
    });
  });
});
