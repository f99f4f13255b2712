import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { Page } from 'playwright-core';
import { launchChromium, stopChromium, type Chromium } from '../browser.js';
import { ROOT, TestDaemon, eventually, run } from '../helpers.js';

/**
 * The Human Gate in a real browser (Debian's chromium, driven by playwright-core) against a real nasd and mount:
 * log in with nas web open, decide PRs, restore from the recycle area; the page's security rules hold.
 * Screenshots go to test-output/ to be looked at.
 */
const SHOTS = `${ROOT}/test-output`;
const XSS = '<script>alert(1)</script> tidy the rules';

describe('the web page', () => {
  let d: TestDaemon;
  let chrome: Chromium | undefined;
  let page: Page;
  let base: string;
  const dialogs: string[] = [];
  const cspViolations: string[] = [];
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const mainHead = async () => (await d.git('rev-parse', 'main')).stdout.trim();
  let prA: number;
  let prB: number;

  beforeAll(async () => {
    d = await TestDaemon.withBranch('work');
    try {
      // PR A waits: it changes what agents load at start, and the run read untrusted input. Its intent is hostile.
      await fs.readFile(p('work', 'inbox/README.md'));
      await fs.appendFile(p('work', 'AGENTS.md'), '\nAlways cite sources.\n');
      await fs.writeFile(p('work', 'outbox/logo.bin'), Buffer.from([0, 1, 2, 3, 0, 255]));
      // Enough files for the diff to take two pages.
      await fs.mkdir(p('work', 'outbox/many'));
      for (let i = 0; i < 30; i++) await fs.writeFile(p('work', `outbox/many/f${i}.md`), `file ${i}\n`);
      prA = (await d.nasJson('propose', 'demo/work', '--into', 'main', '--intent', XSS)).id;
      // PR B waits: it deletes a file (which goes to the recycle area).
      expect((await d.nas('branch', 'create', 'demo/other')).code).toBe(0);
      await fs.unlink(p('other', 'outbox/README.md'));
      prB = (await d.nasJson('propose', 'demo/other', '--into', 'main', '--intent', 'drop the outbox readme')).id;
      await fs.mkdir(SHOTS, { recursive: true });
      chrome = await launchChromium();
      page = await (await chrome.browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
      page.on('dialog', (dialog) => {
        dialogs.push(dialog.message());
        void dialog.dismiss();
      });
      page.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
      });
    } catch (err) {
      await d.cleanup();
      throw err;
    }
  });
  afterAll(async () => {
    await stopChromium(chrome);
    await d?.cleanup();
  });

  it('gives nothing without a login, and a one-time link only to the owner', async () => {
    const token = (await d.nas('lease', 'issue', 'demo/work', '--principal', 'nobody')).stdout.trim();
    const byLease = await d.nasWith({ NAS_LEASE: token, owner: false }, 'web', 'open');
    expect(byLease.code).toBe(1);
    expect(byLease.stderr).toMatch(/owner action/);
    const link = await d.nasJson('web', 'open');
    base = new URL(link.url).origin;
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const api = await fetch(`${base}/api/v1/decisions`);
    expect(api.status).toBe(401);
    expect(await api.text()).not.toMatch(/tidy the rules/);
    const home = await fetch(`${base}/`);
    expect(home.status).toBe(401);
    const html = await home.text();
    expect(html).toMatch(/nas web open/);
    expect(html).not.toMatch(/tidy the rules/);
    expect(home.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    // A name the page does not know (DNS rebinding) gets nothing either.
    expect(await statusWithHost(`${base}/`, 'evil.example')).toBe(421);
    // The link works once.
    await page.goto(link.url);
    expect(new URL(page.url()).pathname).toBe('/');
    const again = await fetch(link.url, { redirect: 'manual' });
    expect(again.status).toBe(401);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'nas_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
  });

  it('lists what waits, oldest first, with why; an intent with HTML shows as text', async () => {
    await page.waitForSelector('.card');
    const cards = page.locator('.card');
    expect(await cards.count()).toBe(2);
    expect(await cards.nth(0).getAttribute('data-pr')).toBe(`demo/${prA}`);
    expect(await cards.nth(0).locator('.intent').textContent()).toBe(XSS);
    expect(await cards.nth(0).locator('.reasons').textContent()).toMatch(/untrusted input: inbox\/README\.md/);
    expect(await cards.nth(1).locator('.reasons').textContent()).toMatch(/deletes outbox\/README\.md/);
    expect(await page.locator('main script').count()).toBe(0);
    await page.screenshot({ path: `${SHOTS}/web-inbox.png`, fullPage: true });
    expect(dialogs).toEqual([]);
  });

  it('shows a PR: its diff, binary file with sizes, reads with inbox highlighted, checks, provenance', async () => {
    await page.locator(`.card[data-pr="demo/${prA}"]`).click();
    await page.waitForSelector('.d2h-file-wrapper');
    expect(await page.locator('main').evaluate((m) => [...m.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent === 'null'))).toBe(false);
    expect(await page.locator('h1.intent').textContent()).toBe(XSS);
    expect(await page.locator('.d2h-file-name').allTextContents()).toEqual(expect.arrayContaining([expect.stringContaining('AGENTS.md')]));
    expect(await page.locator('.diff').textContent()).toContain('Always cite sources.');
    const logo = page.locator('table.files tr', { hasText: 'outbox/logo.bin' });
    expect(await logo.textContent()).toMatch(/binary/);
    expect(await logo.textContent()).toMatch(/6 B/);
    expect(await page.locator('.reads li.inbox').textContent()).toMatch(/inbox\/README\.md.*untrusted input/);
    expect(await page.locator('.check-row').count()).toBeGreaterThan(0);
    expect(await page.locator('.prov').textContent()).toMatch(/reads digest/);
    expect(await page.locator('.pager span').textContent()).toMatch(/files 1–25 of 32/);
    await page.locator('.pager button', { hasText: 'next' }).click();
    await page.waitForFunction(() => document.querySelector('.pager span')?.textContent?.includes('files 26–32'));
    expect(await page.locator('.d2h-file-wrapper').count()).toBe(7);
    await page.locator('.pager button', { hasText: 'previous' }).click();
    await page.locator('.toggle button[data-format="line-by-line"]').click();
    await page.waitForSelector('.d2h-file-diff');
    await page.locator('.toggle button[data-format="side-by-side"]').click();
    await page.screenshot({ path: `${SHOTS}/web-pr.png`, fullPage: true });
    expect(dialogs).toEqual([]);
  });

  it('refuses a state change without the CSRF token', async () => {
    const status = await page.evaluate(async (url) => (await fetch(url, { method: 'POST' })).status, `/api/v1/homes/demo/prs/${prA}/approve`);
    expect(status).toBe(403);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'nas_session')!;
    const outside = await fetch(`${base}/api/v1/homes/demo/prs/${prA}/approve`, { method: 'POST', headers: { cookie: `nas_session=${cookie.value}` } });
    expect(outside.status).toBe(403);
    expect((await d.nasJson('pr', 'show', 'demo', String(prA))).state).toBe('waiting');
  });

  it('approves a PR only once confirmed, naming the branch and its files: main moves, the page says who decided', async () => {
    const before = await mainHead();
    const approvals: string[] = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/approve')) approvals.push(r.url());
    });
    expect(await page.locator('main h2', { hasText: /^Why it waits$/ }).count()).toBe(1);
    // Approve asks first, naming what the merge brings; cancelling sends nothing.
    await page.locator('button.approve').click();
    const confirm = page.locator('.confirm');
    await confirm.waitFor();
    expect(await confirm.textContent()).toMatch(/Merge branch work into main: 32 files \(31 added, 1 modified, 0 deleted\)\?/);
    await page.screenshot({ path: `${SHOTS}/web-approve-confirm.png` });
    await confirm.locator('button.cancel').click();
    expect(await page.locator('.confirm').count()).toBe(0);
    await page.waitForTimeout(500);
    expect(approvals).toEqual([]);
    expect((await d.nasJson('pr', 'show', 'demo', String(prA))).state).toBe('waiting');
    expect(await mainHead()).toBe(before);
    await page.locator('button.approve').click();
    await page.locator('.confirm button.confirm-merge').click();
    await eventually(async () => (await mainHead()) !== before, 'main to move');
    const pr = await d.nasJson('pr', 'show', 'demo', String(prA));
    expect(pr).toMatchObject({ state: 'merged', merged: { by: 'root' } });
    expect((await d.gitBlob('main:AGENTS.md')).toString()).toMatch(/Always cite sources\./);
    await page.waitForSelector('.decided.merged');
    expect(await page.locator('.decided').textContent()).toMatch(/Approved by root/);
    expect(approvals).toHaveLength(1);
    // Merged, it no longer "waits": why it waited is still there to read.
    await page.waitForSelector('main h2:text-is("Why it waited")');
    expect(await page.locator('main h2', { hasText: /^Why it waits$/ }).count()).toBe(0);
  });

  it('rejects another with a reason, and updates the inbox live', async () => {
    await page.goto(`${base}/`);
    await page.waitForSelector(`.card[data-pr="demo/${prB}"]`);
    // A PR that arrives while the page is open appears without a reload.
    expect((await d.nas('branch', 'create', 'demo/late')).code).toBe(0);
    await fs.unlink(p('late', 'outbox/README.md'));
    const late = (await d.nasJson('propose', 'demo/late', '--into', 'main', '--intent', 'arrives while you look')).id;
    await page.waitForSelector(`.card[data-pr="demo/${late}"]`, { timeout: 10_000 });
    await page.locator(`.card[data-pr="demo/${prB}"]`).click();
    await page.waitForSelector('.reject-form textarea');
    await page.locator('.reject-form textarea').fill('keep the readme: people read it');
    await page.locator('button.reject').click();
    await page.waitForSelector('.decided.rejected');
    expect(await page.locator('.decided').textContent()).toMatch(/Rejected by root.*keep the readme/);
    expect((await d.nasJson('pr', 'show', 'demo', String(prB))).decision).toMatchObject({ action: 'reject', why: 'keep the readme: people read it' });
  });

  it('restores a file from the recycle area into a branch', async () => {
    await page.goto(`${base}/home/demo`);
    const row = page.locator('tr[data-trash][data-branch="other"]', { hasText: 'outbox/README.md' });
    await row.waitFor();
    await page.locator('select.restore-into').selectOption('other');
    await row.locator('button', { hasText: 'Restore into other' }).click();
    await page.waitForSelector('.notice.ok');
    await eventually(async () => (await fs.readFile(p('other', 'outbox/README.md'), 'utf8').catch(() => '')).includes('Outbox'), 'the file back in demo@other');
    expect(await page.locator('.chart').count()).toBe(1);
    await page.screenshot({ path: `${SHOTS}/web-home.png`, fullPage: true });
    expect(cspViolations).toEqual([]);
    expect(dialogs).toEqual([]);
  });

  it('pages a big recycle area, 25 rows at a time, under checkpoints and history; the page stays short', async () => {
    expect((await d.nas('branch', 'create', 'demo/bulk')).code).toBe(0);
    await fs.mkdir(p('bulk', 'outbox/heap'));
    for (let i = 0; i < 60; i++) await fs.writeFile(p('bulk', `outbox/heap/n${String(i).padStart(2, '0')}.md`), `note ${i}\n`);
    expect((await d.nas('sync', 'demo/bulk')).code).toBe(0);
    for (let i = 0; i < 60; i++) await fs.unlink(p('bulk', `outbox/heap/n${String(i).padStart(2, '0')}.md`));
    expect((await d.nas('sync', 'demo/bulk')).code).toBe(0);
    // One entry per deletion, what was restored left out (the --json answer has every record, marked).
    const total = (await d.nasJson<{ within?: string; restored?: unknown }[]>('trash', 'list', 'demo')).filter((t) => !t.within && !t.restored).length;
    expect(total).toBeGreaterThanOrEqual(60);
    await page.goto(`${base}/home/demo`);
    await page.waitForSelector('tr[data-trash]');
    expect(await page.locator('tr[data-trash]').count()).toBe(25);
    expect(await page.locator('tr[data-trash] select').count()).toBe(0);
    expect(await page.locator('.recycle .pager span').textContent()).toContain(`entries 1–25 of ${total}`);
    // Checkpoints and history come before the recycle area; the page stays a few screens tall.
    const headings = await page.locator('main h2').allTextContents();
    const at = (re: RegExp) => headings.findIndex((x) => re.test(x));
    expect(at(/^Checkpoints/)).toBeLessThan(at(/^Recycle area/));
    expect(at(/^History of main/)).toBeLessThan(at(/^Recycle area/));
    expect(await page.evaluate(() => document.documentElement.scrollHeight)).toBeLessThan(4000);
    // No column spills out of its card.
    expect(await page.locator('section.recycle').evaluate((s) => s.scrollWidth <= s.clientWidth)).toBe(true);
    const first = await page.locator('tr[data-trash]').first().getAttribute('data-trash');
    await page.locator('.recycle .pager button', { hasText: 'next' }).click();
    await page.waitForFunction(() => document.querySelector('.recycle .pager span')?.textContent?.includes('entries 26–50'));
    expect(await page.locator('tr[data-trash]').count()).toBe(25);
    expect(await page.locator('tr[data-trash]').first().getAttribute('data-trash')).not.toBe(first);
    await page.screenshot({ path: `${SHOTS}/web-home-recycle.png`, fullPage: true });
    expect(dialogs).toEqual([]);
  });

  it("shows a PR's full modes: a file made setuid, and the mode-risk label that makes it wait", async () => {
    expect((await d.nas('branch', 'create', 'demo/modes')).code).toBe(0);
    await fs.writeFile(p('modes', 'outbox/tool'), '#!/bin/sh\necho hi\n');
    await fs.chmod(p('modes', 'outbox/tool'), 0o4755);
    const pr = await d.nasJson('propose', 'demo/modes', '--into', 'main', '--intent', 'a tool');
    expect(pr.state).toBe('waiting');
    await page.goto(`${base}/pr/demo/${pr.id}`);
    await page.waitForSelector('.d2h-file-wrapper');
    expect(await page.locator('table.files tr', { hasText: 'outbox/tool' }).textContent()).toMatch(/mode 104755/);
    expect(await page.locator('ul.trust').textContent()).toMatch(/setuid, setgid, world-writable\): outbox\/tool is new with mode 104755 \(setuid\)/);
    expect(dialogs).toEqual([]);
  });

  it('shows owner-, mode- and time-only changes with before and after, and a new folder as added', async () => {
    // PR A, merged above, made outbox/many/*: main holds their metadata records.
    expect((await d.nas('branch', 'create', 'demo/meta')).code).toBe(0);
    await fs.chown(p('meta', 'outbox/many/f0.md'), 65534, 65534);
    await fs.chmod(p('meta', 'outbox/many/f1.md'), 0o600);
    const then = new Date('2020-01-02T03:04:05Z');
    await fs.utimes(p('meta', 'outbox/many/f2.md'), then, then);
    await fs.mkdir(p('meta', 'outbox/fresh'));
    await fs.writeFile(p('meta', 'outbox/fresh/new.md'), 'new\n');
    const pr = await d.nasJson('propose', 'demo/meta', '--into', 'main', '--intent', 'owners, modes and times');
    await page.goto(`${base}/pr/demo/${pr.id}`);
    await page.waitForSelector('table.files');
    const row = (path: string) => page.locator('table.files tr', { hasText: path });
    expect(await row('outbox/many/f0.md').textContent()).toMatch(/owner root → nobody/);
    expect(await row('outbox/many/f0.md').textContent()).toMatch(/group root → nogroup/);
    expect(await row('outbox/many/f1.md').textContent()).toMatch(/mode 100644 → 100600/);
    expect(await row('outbox/many/f2.md').textContent()).toMatch(/mtime .+ → 2020-01-02T03:04:05Z/);
    expect(await page.locator('table.files tr[data-folder]', { hasText: 'outbox/fresh/' }).locator('.badge').textContent()).toBe('added');
    expect(await page.locator('.pr-head + .meta').textContent()).toMatch(/2 added, 3 modified, 0 deleted/);
    // In the diff too: the file whose owner alone changed says so where its patch would be.
    await page.waitForSelector('.d2h-file-wrapper');
    const f0 = page.locator('.d2h-file-wrapper', { hasText: 'outbox/many/f0.md' });
    expect(await f0.locator('.meta-change').textContent()).toMatch(/owner root → nobody/);
    await page.screenshot({ path: `${SHOTS}/web-pr-metadata.png`, fullPage: true });
    expect(dialogs).toEqual([]);
  });

  it('links each file of a PR to its content in the branch and in main, where it has one: plain text, never a page', async () => {
    expect((await d.nas('branch', 'create', 'demo/links')).code).toBe(0);
    await fs.appendFile(p('links', 'AGENTS.md'), '\nA line only the branch has.\n');
    const html = '<h1 id="injected">hi</h1><script>alert(1)</script>\n';
    await fs.writeFile(p('links', 'outbox/page.html'), html);
    await fs.writeFile(p('links', 'outbox/raw.bin'), Buffer.from([0, 1, 2, 255, 10]));
    await fs.unlink(p('links', 'outbox/many/f3.md'));
    const pr = await d.nasJson('propose', 'demo/links', '--into', 'main', '--intent', 'files to open');
    await page.goto(`${base}/pr/demo/${pr.id}`);
    await page.waitForSelector('table.files');
    const row = (path: string) => page.locator('table.files tr', { hasText: path });
    const links = async (path: string) => Object.fromEntries(await row(path).locator('a[data-side]')
      .evaluateAll((as) => as.map((a) => [a.getAttribute('data-side'), a.getAttribute('href')])));
    /** A link followed in the page's session: its status, headers and bytes. */
    const follow = (href: string) => page.evaluate(async (url) => {
      const r = await fetch(url);
      return { status: r.status, headers: Object.fromEntries(r.headers), bytes: [...new Uint8Array(await r.arrayBuffer())] };
    }, href);
    const agents = await links('AGENTS.md');
    expect(Object.keys(agents)).toEqual(['branch', 'main']);
    const [branchAgents, mainAgents] = [await follow(agents.branch), await follow(agents.main)];
    expect(Buffer.from(branchAgents.bytes)).toEqual(await d.gitBlob(`${pr.head}:AGENTS.md`));
    expect(Buffer.from(mainAgents.bytes)).toEqual(await d.gitBlob('main:AGENTS.md'));
    expect(Buffer.from(branchAgents.bytes).toString()).toContain('A line only the branch has.');
    expect(Buffer.from(mainAgents.bytes).toString()).not.toContain('A line only the branch has.');
    // An added file has only its branch's content, a deleted one only main's.
    const added = await links('outbox/raw.bin');
    expect(Object.keys(added)).toEqual(['branch']);
    expect((await follow(added.branch)).bytes).toEqual([0, 1, 2, 255, 10]);
    const deleted = await links('outbox/many/f3.md');
    expect(Object.keys(deleted)).toEqual(['main']);
    expect(Buffer.from((await follow(deleted.main)).bytes).toString()).toBe('file 3\n');
    // HTML from a branch is text: not sniffed, sandboxed, named; opened, it shows as typed and runs nothing.
    const page1 = await links('outbox/page.html');
    const got = await follow(page1.branch);
    expect(Buffer.from(got.bytes).toString()).toBe(html);
    expect(got.headers).toMatchObject({
      'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff', 'content-disposition': "inline; filename*=UTF-8''page.html",
    });
    expect(got.headers['content-security-policy']).toMatch(/script-src 'self'.*; sandbox$/);
    const [tab] = await Promise.all([page.context().waitForEvent('page'), row('outbox/page.html').locator('a[data-side="branch"]').click()]);
    tab.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await tab.waitForLoadState();
    expect(await tab.locator('#injected').count()).toBe(0);
    expect(await tab.locator('body').textContent()).toContain('<script>alert(1)</script>');
    await tab.close();
    // A path that leaves the Home, or hides a line break, is refused with why; a file a side lacks is not found; no session, nothing.
    const at = (side: string, path: string) => `/api/v1/homes/demo/prs/${pr.id}/file/${side}/${encodeURIComponent(path)}`;
    const refusal = async (href: string) => {
      const r = await follow(href);
      return [r.status, JSON.parse(Buffer.from(r.bytes).toString()).error];
    };
    expect(await refusal(at('branch', '../../etc/passwd'))).toEqual([400, expect.stringMatching(/'\.\.' component/)]);
    expect(await refusal(at('branch', '/etc/passwd'))).toEqual([400, expect.stringMatching(/must be relative/)]);
    expect(await refusal(at('branch', 'outbox/a\nb'))).toEqual([400, expect.stringMatching(/control character/)]);
    expect(await refusal(at('elsewhere', 'AGENTS.md'))).toEqual([400, expect.stringMatching(/from its branch or from main/)]);
    expect(await refusal(at('main', 'outbox/raw.bin'))).toEqual([404, 'outbox/raw.bin is not a file in main']);
    expect((await fetch(`${base}${agents.branch}`)).status).toBe(401);
    expect(cspViolations).toEqual([]);
    expect(dialogs).toEqual([]);
  });

  it("marks a failed run's PR: its exit status on the PR page and in the inbox", async () => {
    const env = { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' };
    const r = await run(process.execPath, [`${ROOT}/dist/src/cli/main.js`, '--socket', d.socket, 'run', '--json', 'demo', '--user', 'nobody', '--intent', 'half done',
      '--', 'sh', '-c', 'echo half > outbox/half.md; exit 3'], { env });
    expect(r.code, r.stderr).toBe(3);
    const pr = JSON.parse(r.stdout).pr;
    expect(pr.state).toBe('waiting');
    await page.goto(`${base}/pr/demo/${pr.id}`);
    await page.waitForSelector('.pr-head');
    expect(await page.locator('.pr-head .flag.exit.failed').textContent()).toBe('run failed: exit 3');
    expect(await page.locator('.prov').textContent()).toMatch(/run exit3/);
    // What network it had (the lease scope egress): none outside the run.
    expect(await page.locator('.prov').textContent()).toMatch(/run egressno \(loopback only\)/);
    expect(await page.locator('ul.reasons').textContent()).toMatch(/the run's command failed \(exit 3\)/);
    await page.goto(`${base}/`);
    const card = page.locator(`.card[data-pr="demo/${pr.id}"]`);
    await card.waitFor();
    expect(await card.locator('.flag.exit.failed').textContent()).toBe('run failed: exit 3');
    // PRs that are no run's carry no mark.
    expect(await page.locator('.card .flag.exit').count()).toBe(1);
    await page.screenshot({ path: `${SHOTS}/web-run-failed.png`, fullPage: true });
    expect(dialogs).toEqual([]);
  });

  it('filters the inbox by Home and by reason, and keeps the filter in the address', async () => {
    expect((await d.nas('home', 'create', 'ops')).code).toBe(0);
    expect((await d.nas('branch', 'create', 'ops/tidy')).code).toBe(0);
    await fs.unlink(d.path('ops@tidy', 'outbox/README.md'));
    const ops = (await d.nasJson('propose', 'ops/tidy', '--into', 'main', '--intent', 'tidy the ops outbox')).id;
    await page.goto(`${base}/`);
    await page.waitForSelector(`.card[data-pr="ops/${ops}"]`);
    const pr = async () => page.locator('.card').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-pr')));
    const all = await pr();
    expect(all.some((x) => x!.startsWith('demo/'))).toBe(true);
    await page.locator('select.filter-home').selectOption('ops');
    expect(await pr()).toEqual([`ops/${ops}`]);
    expect(new URL(page.url()).search).toBe('?home=ops');
    expect(await page.locator('main > p.muted').textContent()).toMatch(/1 of \d+ shown/);
    await page.locator('select.filter-home').selectOption({ index: 0 });
    expect(await pr()).toEqual(all);
    // By reason: only the PRs that wait because they delete files (ops's and demo's "late"), none that waits for another reason.
    await page.locator('select.filter-reason').selectOption('deletes files');
    const deleting = await pr();
    expect(deleting).toContain(`ops/${ops}`);
    expect(deleting.length).toBeLessThan(all.length);
    for (const id of deleting) expect(await page.locator(`.card[data-pr="${id}"] .reasons`).textContent()).toMatch(/deletes /);
    await page.reload();
    await page.waitForSelector(`.card[data-pr="ops/${ops}"]`);
    expect(await pr()).toEqual(deleting);
    expect(await page.locator('select.filter-reason').inputValue()).toBe('deletes files');
    await page.screenshot({ path: `${SHOTS}/web-inbox-filter.png`, fullPage: true });
    expect(dialogs).toEqual([]);
  });

  it('marks the PRs of an imported copy of a Home, in the inbox and on the PR page; not those of the Home exported', async () => {
    const bundle = `${d.dir}/demo.bundle`;
    expect((await d.nas('export', 'demo', bundle)).code).toBe(0);
    expect((await d.nas('import', bundle, '--as', 'copy')).code).toBe(0);
    for (const x of await d.nasJson<any[]>('pr', 'list', 'copy')) expect(x.imported).toMatchObject({ from: 'demo', file: bundle });
    const waiting = (await d.nasJson<any[]>('pr', 'inbox')).filter((x) => x.home === 'copy');
    expect(waiting.length).toBeGreaterThan(0);
    const id = waiting[0].id;
    await page.goto(`${base}/?home=copy`);
    await page.waitForSelector(`.card[data-pr="copy/${id}"]`);
    expect(await page.locator('.card').count()).toBe(waiting.length);
    expect(await page.locator('.card .flag.imported').count()).toBe(waiting.length);
    expect(await page.locator(`.card[data-pr="copy/${id}"] .flag.imported`).textContent()).toMatch(/^imported from demo, (just now|\d+ min ago)$/);
    await page.goto(`${base}/?home=demo`);
    await page.waitForSelector(`.card[data-pr="demo/${id}"]`);
    expect(await page.locator('.card .flag.imported').count()).toBe(0);
    await page.goto(`${base}/pr/copy/${id}`);
    const flag = page.locator('.pr-head .flag.imported');
    await flag.waitFor();
    expect(await flag.textContent()).toMatch(/^imported from demo, /);
    expect(await flag.getAttribute('title')).toContain(bundle);
    await page.screenshot({ path: `${SHOTS}/web-pr-imported.png`, fullPage: true });
    expect(dialogs).toEqual([]);
  });

  it("lets a person pick the side of a binary file an update left unresolved, on the conflict PR's page", async () => {
    const pic = (n: number) => Buffer.from([0x89, 0x50, 0, n, 0xff, 0]);
    await d.pushToMain({ 'outbox/pic.bin': pic(0) }, 'a picture');
    for (const b of ['pic-a', 'pic-b']) expect((await d.nas('branch', 'create', `demo/${b}`)).code).toBe(0);
    await fs.writeFile(p('pic-a', 'outbox/pic.bin'), pic(1));
    await fs.writeFile(p('pic-b', 'outbox/pic.bin'), pic(2));
    const first = await d.nasJson('propose', 'demo/pic-a', '--into', 'main', '--intent', 'the first picture');
    if (first.state === 'waiting') expect((await d.nas('pr', 'approve', 'demo', String(first.id))).code).toBe(0);
    // The second conflicts with main (its PR says so, and the command exits 1).
    const second = JSON.parse((await d.nas('--json', 'propose', 'demo/pic-b', '--into', 'main', '--intent', 'the second picture')).stdout);
    expect(second.state).toBe('conflict');
    expect((await d.nas('branch', 'update', 'demo/pic-b')).code).toBe(1);

    await page.goto(`${base}/pr/demo/${second.id}`);
    const row = page.locator('.unresolved li[data-path="outbox/pic.bin"]');
    await row.waitFor();
    expect(await row.textContent()).toMatch(/outbox\/pic\.bin — it is not text/);
    await row.locator('button.take-main').click();
    await page.waitForSelector('.notice.ok');
    await eventually(async () => (await page.locator('.unresolved li').count()) === 0, 'the unresolved list to empty');
    expect((await fs.readFile(p('pic-b', 'outbox/pic.bin'))).equals(pic(1))).toBe(true);
    const trash = await d.nasJson<{ path: string; branch: string }[]>('trash', 'list', 'demo');
    expect(trash.some((t) => t.branch === 'pic-b' && t.path === 'outbox/pic.bin')).toBe(true);
    expect(cspViolations).toEqual([]);
  });

  it('shows one row per deletion in the recycle area: a folder with its count, expandable; narrowed by branch and search', async () => {
    expect((await d.nas('branch', 'create', 'demo/sweep')).code).toBe(0);
    await fs.mkdir(p('sweep', 'outbox/sweep'));
    for (let i = 0; i < 40; i++) await fs.writeFile(p('sweep', `outbox/sweep/f${i}.md`), `swept ${i}\n`);
    await d.sync('demo/sweep');
    expect((await run('rm', ['-r', p('sweep', 'outbox/sweep')])).code).toBe(0);
    await d.sync('demo/sweep');
    await page.goto(`${base}/home/demo`);
    await page.locator('select.filter-branch').selectOption('sweep');
    const rows = page.locator('table.trash tbody tr');
    await eventually(async () => (await rows.count()) === 1, 'one row for the folder');
    const folder = rows.first().locator('details.went-with');
    expect(await folder.locator('summary').textContent()).toBe('outbox/sweep/ 40 files');
    await folder.locator('summary').click();
    expect(await folder.locator('li').count()).toBe(40);
    // A search finds the folder by a path inside it, and nothing else of that branch.
    await page.locator('input.filter-path').fill('f39.md');
    await eventually(async () => (await rows.count()) === 1 && /outbox\/sweep\//.test((await rows.first().textContent()) ?? ''), 'the folder found by a file in it');
    await page.locator('input.filter-path').fill('no such path');
    await eventually(async () => (await rows.count()) === 0, 'nothing found');
    expect(cspViolations).toEqual([]);
  });

  it('logs out: the session is gone, and the page asks for a new link', async () => {
    const old = (await page.context().cookies()).find((c) => c.name === 'nas_session')!.value;
    await page.locator('#logout').click();
    await page.waitForURL(`${base}/`);
    expect(await page.locator('main.login').textContent()).toMatch(/nas web open/);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'nas_session');
    expect(cookie).toBeUndefined();
    expect((await fetch(`${base}/api/v1/decisions`, { headers: { cookie: `nas_session=${old}` } })).status).toBe(401);
  });
});


/** fetch cannot set Host: a plain request that names another host. */
function statusWithHost(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}
