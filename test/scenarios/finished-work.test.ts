import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { launchChromium, stopChromium } from '../browser.js';
import { TestDaemon, eventually, run } from '../helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

/** A page of Debian's chromium, closed and killed whatever happens. */
async function withPage(use: (page: Page) => Promise<void>): Promise<void> {
  const chrome = await launchChromium();
  try {
    await use(await (await chrome.browser.newContext()).newPage());
  } finally {
    await stopChromium(chrome);
  }
}

/**
 * Finished work leaves (issue 31, item 4): a merged branch is listed as merged and removed after the Home's
 * merged_branch_grace unless it was written since; a PR replaced by a later one of its branch, or whose branch
 * went, leaves the inbox; a run that changed nothing, or whose PR merged, leaves no branch. The grace period is
 * passed by stepping nasd's TTL clock (its hidden test flag), not by waiting.
 */
describe('finished work leaves', () => {
  let d: TestDaemon;
  let clockDir: string;
  const HOUR = 3_600_000;
  const stepClock = (ms: number) => fs.writeFile(`${clockDir}/offset`, String(ms));
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const branch = async (name: string) => {
    const r = await d.nas('branch', 'create', `demo/${name}`);
    expect(r.code, r.stderr).toBe(0);
  };
  const listed = async (name: string) => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === name);
  /** The PR filed (a conflict exits 1, with the PR printed all the same). */
  const propose = async (name: string, intent: string) => {
    const r = await d.nas('--json', 'propose', `demo/${name}`, '--into', 'main', '--intent', intent);
    expect(r.stdout, r.stderr).not.toBe('');
    return JSON.parse(r.stdout);
  };
  const prState = async (id: number) => (await d.nasJson('pr', 'show', 'demo', String(id))).state;
  const inbox = async () => (await d.nasJson<any[]>('pr', 'inbox')).map((x) => x.id);
  const env = () => ({ NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' });
  const nasRun = async (...args: string[]) => {
    const r = await run(process.execPath, [CLI, '--socket', d.socket, 'run', '--json', ...args], { env: env() });
    expect(r.stdout, r.stderr).not.toBe('');
    return { code: r.code, stderr: r.stderr, out: JSON.parse(r.stdout) };
  };

  beforeAll(async () => {
    clockDir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-finished-'));
    await stepClock(0);
    d = await TestDaemon.start({ extraArgs: ['--demo', '--test-clock-offset-file', `${clockDir}/offset`] });
    const limits = (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')) + 'merged_branch_grace: 1h\n';
    await d.pushToMain({ '.nas/limits.yaml': limits, 'outbox/shared.md': 'one\ntwo\nthree\n' }, 'a grace for merged branches');
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).includes('merged_branch_grace'), 'main to show the limits');
    expect((await d.nasJson<any[]>('home', 'list'))[0].problems).toEqual([]);
  });
  afterAll(async () => {
    await d?.cleanup();
    if (clockDir) await fs.rm(clockDir, { recursive: true, force: true });
  });

  it('lists a merged branch as merged and removes it after the grace; one written after its merge is live again and stays', async () => {
    await branch('done');
    await fs.writeFile(p('done', 'outbox/done.md'), 'done\n');
    const merged = await propose('done', 'finished work');
    expect(merged.state).toBe('merged');
    await branch('more');
    await fs.writeFile(p('more', 'outbox/more.md'), 'first part\n');
    expect((await propose('more', 'first part')).state).toBe('merged');

    // Merged: its record says which PR, and every listing says so.
    expect(await listed('done')).toMatchObject({ merged: { pr: merged.id, head: merged.head } });
    const text = (await d.nas('branch', 'list', 'demo')).stdout;
    expect(text).toMatch(/^BRANCH\s+HEAD\s+FROM\s+STATE\s+EXPIRES/);
    expect(text.split('\n').find((l) => l.startsWith('done '))).toContain(`merged (PR ${merged.id})`);
    expect((await d.nasJson('status')).homes[0].merged).toEqual(expect.arrayContaining(['done', 'more']));
    expect((await d.nas('status')).stdout).toMatch(/done \(merged\)/);

    // Scratch is no work: written after the merge, it leaves the branch merged. A versioned file is work.
    await fs.writeFile(p('done', 'workspace/notes.txt'), 'scratch\n');
    await fs.writeFile(p('more', 'outbox/more.md'), 'second part, after the merge\n');
    await d.sync('demo/more');
    expect(await listed('done')).toMatchObject({ merged: { pr: merged.id } });
    expect((await listed('more')).merged).toBeUndefined();
    // The web page's Home page marks the merged branch, not the one written since.
    const link = await d.nasJson('web', 'open');
    await withPage(async (page) => {
      await page.goto(link.url);
      await page.goto(`${new URL(link.url).origin}/home/demo`);
      const row = (name: string) => page.locator('tr', { has: page.locator('td code', { hasText: new RegExp(`^${name}$`) }) });
      await row('done').waitFor();
      expect(await row('done').locator('.flag.merged').textContent()).toBe(`merged · PR ${merged.id}`);
      expect(await row('more').locator('.flag.merged').count()).toBe(0);
    });

    // Past the grace period (the clock stepped 2 h; a maintenance run makes a whole pass).
    await stepClock(2 * HOUR);
    await d.nasJson('maintenance', 'run', 'demo');
    expect(await listed('done')).toBeUndefined();
    await expect(fs.access(p('done', ''))).rejects.toThrow(/ENOENT/);
    // Nothing of it went to the recycle area: its work is on main.
    expect((await d.gitBlob('main:outbox/done.md')).toString()).toBe('done\n');
    expect((await d.nasJson<any[]>('trash', 'list', 'demo')).filter((t) => t.branch === 'done')).toEqual([]);
    // The branch written after its merge is live, its work kept.
    const more = await listed('more');
    expect(more).toBeDefined();
    expect(more.merged).toBeUndefined();
    expect(await fs.readFile(p('more', 'outbox/more.md'), 'utf8')).toBe('second part, after the merge\n');
    await fs.writeFile(p('more', 'outbox/even-more.md'), 'still writable\n');
    expect((await d.nasJson('status')).homes[0].merged).toBeUndefined();
    await stepClock(0);
  });

  it('takes a conflict PR out of the inbox as superseded once a later PR of its branch merged; a superseded PR cannot be approved', async () => {
    await branch('clash');
    await fs.writeFile(p('clash', 'outbox/shared.md'), 'one\nTWO from the branch\nthree\n');
    await d.pushToMain({ 'outbox/shared.md': 'one\nTWO from main\nthree\n' }, 'main changes the same line');
    const first = await propose('clash', 'first try');
    expect(first.state).toBe('conflict');
    expect(await inbox()).toContain(first.id);

    // The branch takes main, the file is settled, and it is proposed again: it merges.
    expect((await d.nas('branch', 'update', 'demo/clash')).code).toBe(1);
    await fs.writeFile(p('clash', 'outbox/shared.md'), 'one\nTWO from both\nthree\n');
    const second = await propose('clash', 'second try');
    expect(second).toMatchObject({ state: 'merged', supersedes: [first.id] });
    expect(await prState(first.id)).toBe('superseded');
    expect(await inbox()).not.toContain(first.id);
    const listedPr = (await d.nasJson<any[]>('pr', 'list', 'demo')).find((x) => x.id === first.id);
    expect(listedPr).toMatchObject({ state: 'superseded', superseded_by: second.id });
    expect((await d.nas('pr', 'list', 'demo')).stdout.split('\n').find((l) => l.startsWith(`${first.id} `))).toMatch(/superseded/);

    // A PR waiting at the Human Gate (it edits AGENTS.md) replaced by a later one: only the later one can be decided.
    await branch('rules');
    await fs.appendFile(p('rules', 'AGENTS.md'), '\nA rule.\n');
    const waiting = await propose('rules', 'a rule');
    expect(waiting.state).toBe('waiting');
    await fs.appendFile(p('rules', 'AGENTS.md'), 'And its reason.\n');
    const later = await propose('rules', 'a rule, with its reason');
    expect(later.state).toBe('waiting');
    expect(await prState(waiting.id)).toBe('superseded');
    expect(await inbox()).toEqual(expect.arrayContaining([later.id]));
    expect(await inbox()).not.toContain(waiting.id);
    const refused = await d.nas('pr', 'approve', 'demo', String(waiting.id));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`PR ${waiting.id} was superseded by PR ${later.id}, a later PR of branch rules, so it cannot be approved: decide PR ${later.id} instead`);
    expect((await d.git('cat-file', '-e', 'main:AGENTS.md')).code).toBe(0);
    expect((await d.gitBlob('main:AGENTS.md')).toString()).not.toContain('A rule.');
    expect((await d.nasJson('pr', 'approve', 'demo', String(later.id))).state).toBe('merged');
    expect((await d.gitBlob('main:AGENTS.md')).toString()).toContain('A rule.\nAnd its reason.\n');
  });

  it('takes a PR whose branch was discarded out of the inbox as expired', async () => {
    await branch('dropped');
    await fs.writeFile(p('dropped', 'outbox/shared.md'), 'one\nTWO from a branch that goes\nthree\n');
    await d.pushToMain({ 'outbox/shared.md': 'one\nTWO from main again\nthree\n' }, 'main changes the same line again');
    const pr = await propose('dropped', 'never mind');
    expect(pr.state).toBe('conflict');
    expect(await inbox()).toContain(pr.id);
    expect((await d.nas('branch', 'discard', 'demo/dropped')).code).toBe(0);
    expect(await prState(pr.id)).toBe('expired');
    expect(await inbox()).not.toContain(pr.id);
    expect((await d.nasJson('pr', 'show', 'demo', String(pr.id))).reasons).toContain('its branch dropped was discarded');
  });

  it('leaves no branch behind for a run that changed nothing, nor for one whose PR merged', async () => {
    const idle = await nasRun('demo', '--user', 'nobody', '--intent', 'look around', '--', 'sh', '-c', 'cat AGENTS.md > /dev/null; echo scratch > workspace/tmp.txt');
    expect(idle.code, idle.stderr).toBe(0);
    expect(idle.out).toMatchObject({ state: 'exited', exit: 0, pr: null, branch_removed: `it changed nothing: its branch ${idle.out.branch} was removed` });
    expect(await listed(idle.out.branch)).toBeUndefined();
    expect((await d.nasJson<any[]>('run', 'list', 'demo')).find((r) => r.id === idle.out.run)).toMatchObject({
      state: 'exited', branch: idle.out.branch, branch_removed: expect.stringContaining('changed nothing'),
    });

    const done = await nasRun('demo', '--user', 'nobody', '--intent', 'write notes', '--', 'sh', '-c', 'echo notes > outbox/run-notes.md');
    expect(done.code, done.stderr).toBe(0);
    expect(done.out.pr).toMatchObject({ state: 'merged' });
    expect(await listed(done.out.branch)).toBeUndefined();
    expect((await d.gitBlob('main:outbox/run-notes.md')).toString()).toBe('notes\n');
    const human = await run(process.execPath, [CLI, '--socket', d.socket, 'run', 'demo', '--user', 'nobody', '--', 'true'], { env: env() });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stderr).toMatch(/exited 0; it changed nothing: its branch run-r[0-9a-f]{8} was removed/);
    expect((await d.nasJson<any[]>('branch', 'list', 'demo')).filter((b) => b.name.startsWith('run-'))).toEqual([]);
  });
});
