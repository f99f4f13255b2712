import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon } from '../helpers.js';

/**
 * Files without a metadata record (the template's, what an operator pushed with git): their times are those
 * of their last change, in every view, so make and rsync see no change where there was none.
 */
describe('files without a metadata record', () => {
  let d: TestDaemon;
  const tick = () => new Promise((r) => setTimeout(r, 1100));
  /** Seconds of the last commit on main that changed rel, as git tells it. */
  const changedAt = async (rel: string) => Number((await d.git('log', '-1', '--format=%ct', 'main', '--', rel)).stdout.trim());
  const mtime = async (view: string, rel: string) => Math.floor((await fs.stat(d.path(view, rel))).mtimeMs / 1000);

  beforeAll(async () => {
    d = await TestDaemon.withBranch('work');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it("keeps a template file's time in main across an unrelated merge", async () => {
    const before = (await fs.stat(d.path('demo', 'AGENTS.md'))).mtimeMs;
    expect(Math.floor(before / 1000)).toBe(await changedAt('AGENTS.md'));
    await tick();
    await fs.writeFile(d.path('demo@work', 'outbox/unrelated.md'), 'x\n');
    const r = await d.nas('propose', 'demo/work', '--into', 'main', '--intent', 'an unrelated change');
    expect(r.stdout, r.stderr).toMatch(/merged/);
    // The kernel may hold the old attributes for a second.
    await tick();
    const head = Number((await d.git('log', '-1', '--format=%ct', 'main')).stdout.trim());
    expect(head).toBeGreaterThan(Math.floor(before / 1000));
    expect((await fs.stat(d.path('demo', 'AGENTS.md'))).mtimeMs).toBe(before);
    expect((await fs.stat(d.path('demo', 'memory/MEMORY.md'))).mtimeMs).toBe(before);
    // A folder the merge did not touch keeps its time too; the merged file shows its own record.
    expect(await mtime('demo', 'skills')).toBe(await changedAt('skills'));
    expect(await mtime('demo', 'outbox/unrelated.md')).toBeGreaterThan(Math.floor(before / 1000));
  });

  it("shows a file pushed by git with its last change's time, in main and in a branch made later", async () => {
    await d.pushToMain({ 'outbox/pushed.md': 'pushed\n' }, 'push a file');
    const pushed = await changedAt('outbox/pushed.md');
    await tick();
    await d.pushToMain({ 'outbox/later.md': 'later\n' }, 'push another');
    await tick();
    expect(await changedAt('outbox/later.md')).toBeGreaterThan(pushed);
    expect(await mtime('demo', 'outbox/pushed.md')).toBe(pushed);
    expect(await mtime('demo', 'outbox/later.md')).toBe(await changedAt('outbox/later.md'));
    await tick();
    expect((await d.nas('branch', 'create', 'demo/later')).code).toBe(0);
    // Not the time the branch forked: the file's own last change, and a copy-up (chmod) keeps it.
    expect(await mtime('demo@later', 'outbox/pushed.md')).toBe(pushed);
    await fs.chmod(d.path('demo@later', 'outbox/pushed.md'), 0o600);
    expect(await mtime('demo@later', 'outbox/pushed.md')).toBe(pushed);
  });
});
