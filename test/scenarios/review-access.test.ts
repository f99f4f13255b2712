import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon } from '../helpers.js';

/**
 * What review and restore hand out (issue 20): a restore only makes the journal grow. Real mounts.
 */

describe('review shows what the mount would', () => {
  let d: TestDaemon;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const head = async (ref: string) => (await d.git('rev-parse', ref)).stdout.trim();
  const branch = async (name: string, ...flags: string[]) => {
    const r = await d.nas('branch', 'create', `demo/${name}`, ...flags);
    expect(r.code, r.stderr).toBe(0);
  };
  const restoreJson = async (as: { NAS_LEASE?: string; owner?: boolean }, ...args: string[]) => {
    const r = await d.nasWith(as, '--json', 'restore', ...args);
    expect(r.stdout, r.stderr).not.toBe('');
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('restores a journal file only forward: a version that is not its content plus more is refused and it stays as it is', async () => {
    const journal = (b: string) => p(b, 'memory/journal/diary.md');
    await branch('diary');
    await fs.appendFile(journal('diary'), 'one\n');
    await d.sync('demo/diary');
    const one = await head('diary');
    await fs.appendFile(journal('diary'), 'two\n');
    await d.sync('demo/diary');
    const grows = /memory\/journal\/diary\.md is append-only: a restore may only make it grow/;
    // Back to when it held one line: it would shrink.
    const back = await restoreJson({}, 'demo@diary', one);
    expect(back.restored).toEqual([]);
    expect(back.refused).toEqual([{ path: 'memory/journal/diary.md', reason: expect.stringMatching(grows) }]);
    // Another branch's version, which rewrites what is there.
    await branch('rewrite');
    await fs.appendFile(journal('rewrite'), 'FORGED\n');
    await d.sync('demo/rewrite');
    const forged = await restoreJson({}, 'demo@diary', await head('rewrite'), '--path', 'memory/journal');
    expect(forged.refused).toEqual([{ path: 'memory/journal/diary.md', reason: expect.stringMatching(grows) }]);
    // Main has no diary: the restore would remove it.
    const gone = await restoreJson({}, 'demo@diary', await head('main'), '--path', 'memory/journal');
    expect(gone.refused).toEqual([{ path: 'memory/journal/diary.md', reason: expect.stringMatching(/append-only: a restore may not remove it/) }]);
    expect(await fs.readFile(journal('diary'), 'utf8')).toBe('one\ntwo\n');
    expect((await d.gitBlob('diary:memory/journal/diary.md')).toString()).toBe('one\ntwo\n');
    // A version that only adds to it is restored: the journal grows.
    await branch('ahead', '--from', 'diary');
    await fs.appendFile(journal('ahead'), 'three\n');
    await d.sync('demo/ahead');
    const forward = await restoreJson({}, 'demo@diary', await head('ahead'), '--path', 'memory/journal');
    expect(forward).toMatchObject({ restored: ['memory/journal/diary.md'], refused: [] });
    expect((await d.gitBlob('diary:memory/journal/diary.md')).toString()).toBe('one\ntwo\nthree\n');
  });
});
