import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon } from '../helpers.js';

/**
 * nasd's log has a line for every change made through the control API, saying what, where and by whom (issue 31:
 * no line for branch create, checkpoint, restore, trash restore...), never a credential or a file's content.
 */
describe('a log line for every change', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  /** The log's lines for a route, as objects. */
  const lines = (route: string) => d.log.split('\n').filter((l) => l.includes(`"msg":"done: ${route}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);

  it('branch create, checkpoint and trash restore each leave one line naming the Home, the subject and who asked', async () => {
    expect((await d.nas('branch', 'create', 'demo/logged')).code).toBe(0);
    expect(lines('createBranch')).toEqual([expect.objectContaining({ role: 'demo', branch: 'logged', by: 'the owner' })]);
    expect((await d.nas('checkpoint', 'create', 'demo@logged', 'before-cleanup')).code).toBe(0);
    expect(lines('createCheckpoint')).toEqual([expect.objectContaining({ role: 'demo', name: 'before-cleanup', branch: 'logged' })]);
    await fs.writeFile(d.path('demo@logged', 'outbox/gone.md'), 'soon gone\n');
    await d.sync('demo/logged');
    await fs.rm(d.path('demo@logged', 'outbox/gone.md'));
    await d.sync('demo/logged');
    expect((await d.nas('trash', 'restore', 'demo', 'outbox/gone.md', '--branch', 'logged')).code).toBe(0);
    expect(lines('restoreTrash')).toEqual([expect.objectContaining({ role: 'demo', path: 'outbox/gone.md', branch: 'logged' })]);
    // Reads and syncs leave none.
    expect(d.log).not.toContain('"msg":"done: sync"');
    expect(d.log).not.toContain('"msg":"done: listBranches"');
  });
});
