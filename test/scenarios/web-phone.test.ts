import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { launchChromium, stopChromium, type Chromium } from '../browser.js';
import { ROOT, TestDaemon, run } from '../helpers.js';

/**
 * The web page on a phone and over a bad line (issue 31, item 10), in Debian's chromium: at 390 x 844 no page
 * scrolls sideways (the inbox, a filtered list, a PR with a wide diff, a merged PR, a Home with its tables and
 * recycle area), the nav wraps with every link on screen, and what is wide scrolls in its own box. The header says
 * in words whether the page is current: "live" while nasd answers, "offline since <time>" when it stops answering
 * (its fetches refused, or nasd stopped by its pid), "live" again when it answers; the Home page keeps itself current.
 */
const WIDTH = 390;
const SHOTS = `${ROOT}/test-output`;

describe('the web page at 390 px, and whether it is live', () => {
  let d: TestDaemon;
  let chrome: Chromium | undefined;
  let page: Page;
  let base: string;
  let waiting: number;
  let merged: number;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);

  beforeAll(async () => {
    d = await TestDaemon.withBranch('work');
    try {
      // A nav wider than a phone: Homes with long names.
      for (const role of ['research-assistant', 'customer-support', 'operations-nightly']) expect((await d.nas('home', 'create', role)).code).toBe(0);
      // A merged PR, and a waiting one whose diff has a line and a path far wider than the screen.
      expect((await d.nas('branch', 'create', 'demo/small')).code).toBe(0);
      await fs.writeFile(p('small', 'outbox/small.md'), 'small\n');
      merged = (await d.nasJson('propose', 'demo/small', '--into', 'main', '--intent', 'a small change')).id;
      if ((await d.nasJson('pr', 'show', 'demo', String(merged))).state === 'waiting') expect((await d.nas('pr', 'approve', 'demo', String(merged))).code).toBe(0);
      await fs.mkdir(p('work', 'outbox/a-rather-long-folder-name-for-a-phone'));
      await fs.writeFile(p('work', 'outbox/a-rather-long-folder-name-for-a-phone/with-an-even-longer-file-name-inside-it.csv'), `${'x'.repeat(400)}\n${'col,'.repeat(80)}\n`);
      await fs.unlink(p('work', 'outbox/README.md'));
      waiting = (await d.nasJson('propose', 'demo/work', '--into', 'main', '--intent', 'a wide table, and the outbox readme dropped')).id;
      // The recycle area: a folder of files deleted in one go.
      expect((await d.nas('branch', 'create', 'demo/sweep')).code).toBe(0);
      await fs.mkdir(p('sweep', 'outbox/old-reports-from-the-previous-quarter'));
      for (let i = 0; i < 5; i++) await fs.writeFile(p('sweep', `outbox/old-reports-from-the-previous-quarter/report-${i}.md`), `r${i}\n`);
      await d.sync('demo/sweep');
      expect((await run('rm', ['-r', p('sweep', 'outbox/old-reports-from-the-previous-quarter')])).code).toBe(0);
      await d.sync('demo/sweep');
      await fs.mkdir(SHOTS, { recursive: true });
      chrome = await launchChromium();
      page = await (await chrome.browser.newContext({ viewport: { width: WIDTH, height: 844 }, isMobile: true, hasTouch: true })).newPage();
      const link = await d.nasJson('web', 'open');
      base = new URL(link.url).origin;
      await page.goto(link.url);
    } catch (err) {
      await d.cleanup();
      throw err;
    }
  });
  afterAll(async () => {
    await stopChromium(chrome);
    await d?.cleanup();
  });

  /** The document's width, and every nav link and header control that is not wholly on screen. */
  const fit = () => page.evaluate((width) => {
    const off = [...document.querySelectorAll('#nav a, header .brand, #live, #logout')].filter((el) => {
      const r = el.getBoundingClientRect();
      return r.width === 0 || r.left < 0 || r.right > width;
    }).map((el) => el.textContent);
    return { width: document.documentElement.scrollWidth, off };
  }, WIDTH);

  const pages: [string, () => string, string][] = [
    ['the decision inbox', () => '/', '.card'],
    ['a list filtered by Home', () => '/?home=demo', '.card'],
    ['a waiting PR with a wide diff', () => `/pr/demo/${waiting}`, '.d2h-file-wrapper'],
    ['a merged PR', () => `/pr/demo/${merged}`, '.decided.merged'],
    ['a Home: its tables and recycle area', () => '/home/demo', 'tr[data-trash]'],
  ];
  for (const [what, path, ready] of pages) {
    it(`fits ${what} in 390 px: no sideways scroll, the whole nav on screen`, async () => {
      await page.goto(`${base}${path()}`);
      await page.waitForSelector(ready);
      await page.waitForFunction(() => document.querySelectorAll('#nav a').length === 5);
      expect(await fit()).toEqual({ width: WIDTH, off: [] });
      await page.screenshot({ path: `${SHOTS}/web-390-${path().replace(/\W+/g, '-').replace(/^-|-$/g, '') || 'inbox'}.png`, fullPage: true });
    });
  }

  it('scrolls a wide diff and a wide table inside their own boxes', async () => {
    await page.goto(`${base}/pr/demo/${waiting}`);
    await page.waitForSelector('.d2h-file-wrapper');
    // The 400-character line is there, in a box that scrolls, and the document still does not.
    const wide = await page.evaluate(() => [...document.querySelectorAll('main *')].some((el) => {
      const style = getComputedStyle(el);
      return el.scrollWidth > el.clientWidth + 50 && /auto|scroll/.test(style.overflowX) && el.getBoundingClientRect().right <= 390;
    }));
    expect(wide).toBe(true);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(WIDTH);
    expect(await page.locator('.diff').textContent()).toContain('x'.repeat(400));
  });

  it('says "live" on the Home page, "offline since <time>" when nasd stops answering, and "live" again when it answers', async () => {
    await page.goto(`${base}/home/demo`);
    const live = page.locator('#live');
    await page.waitForFunction(() => document.getElementById('live')?.textContent === 'live');
    expect(await live.isVisible()).toBe(true);
    expect(await live.getAttribute('role')).toBe('status');
    // The Home page keeps itself current: a branch made elsewhere appears without a reload.
    expect((await d.nas('branch', 'create', 'demo/arrives-later')).code).toBe(0);
    await page.waitForSelector('td code:text-is("arrives-later")', { timeout: 20_000 });

    // Its fetches refused (the connection gone): said in words, not by colour alone.
    await page.route('**/api/**', (route) => route.abort('connectionrefused'));
    await page.waitForFunction(() => /^offline since \d\d:\d\d:\d\d$/.test(document.getElementById('live')?.textContent ?? ''), undefined, { timeout: 30_000 });
    expect(await live.getAttribute('class')).toContain('off');
    await page.screenshot({ path: `${SHOTS}/web-390-offline.png` });
    await page.unroute('**/api/**');
    await page.waitForFunction(() => document.getElementById('live')?.textContent === 'live', undefined, { timeout: 30_000 });

    // nasd itself stops (SIGSTOP by its pid): its answers stop coming, and the page says so; SIGCONT, and it is live.
    const pid = d.child.pid!;
    process.kill(pid, 'SIGSTOP');
    try {
      await page.waitForFunction(() => /^offline since /.test(document.getElementById('live')?.textContent ?? ''), undefined, { timeout: 60_000 });
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await page.waitForFunction(() => document.getElementById('live')?.textContent === 'live', undefined, { timeout: 30_000 });
  });
});
