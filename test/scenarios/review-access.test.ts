import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon } from '../helpers.js';

/**
 * What review and restore hand out (issue 20): a restore only makes the journal grow; the full mode (setuid...)
 * shows in a diff and a PR, and such modes wait for the owner. Real mounts.
 */

const AGENT = 4242;

describe('review shows what the mount would', () => {
  let d: TestDaemon;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const head = async (ref: string) => (await d.git('rev-parse', ref)).stdout.trim();
  const branch = async (name: string, ...flags: string[]) => {
    const r = await d.nas('branch', 'create', `demo/${name}`, ...flags);
    expect(r.code, r.stderr).toBe(0);
  };
  const lease = async (spec: string, ...flags: string[]) => {
    const r = await d.nas('lease', 'issue', spec, ...flags);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
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

  it('shows the full mode (104755) in nas diff and nas pr show, and a PR that gives setuid or world-writable modes waits for the owner', async () => {
    await d.pushToMain({ 'outbox/shared-10.txt': 'shared\n' }, 'a shared file');
    await branch('modes');
    await fs.writeFile(p('modes', 'outbox/tool-10'), '#!/bin/sh\necho hi\n');
    await fs.chmod(p('modes', 'outbox/tool-10'), 0o4755);
    await fs.chmod(p('modes', 'outbox/shared-10.txt'), 0o666);
    expect((await fs.stat(p('modes', 'outbox/tool-10'))).mode & 0o7777).toBe(0o4755);
    await d.sync('demo/modes');

    const diff = await d.nas('diff', 'demo@modes');
    expect(diff.stdout).toContain('diff --git a/outbox/tool-10 b/outbox/tool-10\nnew file mode 104755\n');
    expect(diff.stdout).toContain('diff --git a/outbox/shared-10.txt b/outbox/shared-10.txt\nold mode 100644\nnew mode 100666\n');

    const token = await lease('demo/modes', '--principal', String(AGENT));
    const proposed = await d.nasWith({ NAS_LEASE: token, owner: false }, '--json', 'propose', 'demo/modes', '--into', 'main', '--intent', 'a tool');
    const pr = JSON.parse(proposed.stdout);
    const risks = ['outbox/tool-10 is new with mode 104755 (setuid)', 'outbox/shared-10.txt 100644 -> 100666 (world-writable)'];
    expect(pr.state).toBe('waiting');
    expect(pr.trust.mode_risk).toEqual(risks);
    expect(pr.reasons).toEqual([`gives modes a person must see (mode-risk): ${risks.join(', ')}`]);
    expect((await d.git('cat-file', '-e', 'main:outbox/tool-10')).code).not.toBe(0);

    const text = await d.nas('pr', 'show', 'demo', String(pr.id));
    expect(text.stdout).toContain('new file mode 104755');
    expect(text.stdout).toContain(`modes a person must see (mode-risk): ${risks.join(', ')}`);
    // The web page's PR data: the full modes per file, and the diff it draws.
    const detail = await d.nasJson('pr', 'show', 'demo', String(pr.id));
    expect(detail.files.find((f: { path: string }) => f.path === 'outbox/tool-10')).toMatchObject({ afterMode: '104755' });
    expect(detail.files.find((f: { path: string }) => f.path === 'outbox/shared-10.txt')).toMatchObject({ beforeMode: '100644', afterMode: '100666' });
    expect(detail.diff).toContain('old mode 100644\nnew mode 100666\n');
  });
});
