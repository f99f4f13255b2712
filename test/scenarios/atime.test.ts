import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon } from '../helpers.js';

/**
 * A read moves a file's access time, and nothing else: that is no change to commit. Issue 31 found a read's
 * atime committed as "nasd: write outbox/report.md" with no writer, once a reload looked at what was on disk.
 */
describe('access times alone make no commit', () => {
  let d: TestDaemon;
  const head = async () => (await d.git('rev-parse', 'refs/heads/reading')).stdout.trim();

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    expect((await d.nas('branch', 'create', 'demo/reading')).code).toBe(0);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('a file read after its commit, then a reload that looks at every file left on disk: the branch does not move, and the log stays quiet', async () => {
    const file = d.path('demo@reading', 'outbox/report.md');
    await fs.writeFile(file, 'the report\n');
    await d.sync('demo/reading');
    const committed = await head();
    // Read through the mount (its access time moves on disk: it was older than its modification time), listed too.
    expect(await fs.readFile(file, 'utf8')).toBe('the report\n');
    await fs.readdir(d.path('demo@reading', 'outbox'));
    await d.sync('demo/reading');
    expect(await head()).toBe(committed);
    const logged = d.log.length;
    await d.reload();
    await d.sync('demo/reading');
    expect(await head()).toBe(committed);
    // And the reload says nothing per branch when nothing changed (issue 31: 42 "recovering" lines for a clean one).
    expect(d.log.slice(logged)).not.toMatch(/recovering|"view":"demo@reading"[^\n]*"msg":"commit"/);
    expect((await d.git('log', '--format=%s', 'refs/heads/reading', '--', 'outbox/report.md')).stdout.trim().split('\n')).toHaveLength(1);
  });

  it('a change of the modification time alone is still committed (touch)', async () => {
    const before = await head();
    const record = async () => (await d.git('cat-file', 'blob', 'refs/heads/reading:.nas-meta/outbox/report.md')).stdout;
    const was = await record();
    const t = new Date('2020-01-02T03:04:05Z');
    await fs.utimes(d.path('demo@reading', 'outbox/report.md'), t, t);
    await d.sync('demo/reading');
    expect(await head()).not.toBe(before);
    expect(await record()).not.toBe(was);
  });
});
