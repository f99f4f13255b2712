import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { TestDaemon, run, type RunResult } from '../helpers.js';

/**
 * What review shows (issue 20, items 6, 7 and 10): the control API hands out no file content the mount would
 * refuse the caller, and what a run is shown counts as read; a restore only makes the journal grow; the full
 * mode (setuid...) shows in a diff and a PR, and such modes wait for the owner. Real mounts, real users.
 */

const AGENT = 4242;
const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

describe('review shows what the mount would', () => {
  let d: TestDaemon;
  /** A directory every user may write: what a run's command writes for the test to read. */
  let shared: string;
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
  /** The CLI as the user AGENT, a member of the socket's group, without the owner's token. */
  const asAgent = (lease: string, ...args: string[]): Promise<RunResult> =>
    run('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', process.execPath, CLI, '--socket', d.socket, ...args], {
      env: { NAS_OWNER_TOKEN_FILE: '/nonexistent/owner.token', NAS_OWNER_TOKEN: '', NAS_LEASE: lease },
    });
  const cat = (file: string) => run('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', 'cat', file]);
  const restoreJson = async (as: { NAS_LEASE?: string; owner?: boolean }, ...args: string[]) => {
    const r = await d.nasWith(as, '--json', 'restore', ...args);
    expect(r.stdout, r.stderr).not.toBe('');
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo', '--socket-group', String(AGENT)] });
    // The test's temporary directory is private to root; other users need to reach the mount inside it.
    await fs.chmod(d.dir, 0o755);
    shared = `${d.dir}/shared`;
    await fs.mkdir(shared);
    await fs.chmod(shared, 0o1777);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('withholds from nas diff, nas log --path, nas briefing and nas pr show what the caller could not read through the mount; the owner sees it all', async () => {
    await branch('vault');
    await fs.writeFile(p('vault', 'outbox/private.md'), 'SECRET-PRIVATE\n');
    await fs.chmod(p('vault', 'outbox/private.md'), 0o600);
    await fs.writeFile(p('vault', 'outbox/theirs.md'), 'THEIRS-TEXT\n');
    await fs.chown(p('vault', 'outbox/theirs.md'), AGENT, AGENT);
    await fs.chmod(p('vault', 'outbox/theirs.md'), 0o600);
    await fs.writeFile(p('vault', 'outbox/public.md'), 'PUBLIC-TEXT\n');
    await fs.writeFile(p('vault', 'inbox/task.md'), 'INBOX-TASK\n');
    await fs.writeFile(p('vault', 'memory/resident.md'), '# Resident\n\nRESIDENT-SECRET\n');
    await fs.chmod(p('vault', 'memory/resident.md'), 0o600);
    await d.sync('demo/vault');
    // The mount refuses AGENT root's 0600 file and the inbox (its owner's only), and gives it its own file.
    expect((await cat(p('vault', 'outbox/private.md'))).stderr).toMatch(/Permission denied/);
    expect((await cat(p('vault', 'inbox/task.md'))).stderr).toMatch(/Permission denied/);
    expect((await cat(p('vault', 'outbox/theirs.md'))).stdout).toBe('THEIRS-TEXT\n');

    // nasd cannot tell who calls on its shared socket: without a lease, only what every user may read shows.
    const anyone = await asAgent('', 'diff', 'demo@vault');
    expect(anyone.code, anyone.stderr).toBe(0);
    expect(anyone.stdout).toContain('+PUBLIC-TEXT');
    expect(anyone.stdout).not.toMatch(/SECRET-PRIVATE|INBOX-TASK|THEIRS-TEXT/);
    expect(anyone.stdout).toContain('withheld (you could not read them through the mount): inbox/task.md, memory/resident.md, outbox/private.md, outbox/theirs.md');
    expect(anyone.stdout).toContain('diff --git a/outbox/private.md b/outbox/private.md\nnew file mode 100600\ncontent withheld');
    // With a lease, the caller reads as its principal: AGENT's own file shows, root's 0600 file and the inbox do not.
    await branch('desk');
    const token = await lease('demo/desk', '--principal', String(AGENT));
    const diff = await asAgent(token, 'diff', 'demo@vault');
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toContain('+PUBLIC-TEXT');
    expect(diff.stdout).toContain('+THEIRS-TEXT');
    expect(diff.stdout).not.toMatch(/SECRET-PRIVATE|INBOX-TASK/);
    expect(diff.stdout).toContain('withheld (you could not read them through the mount): inbox/task.md, memory/resident.md, outbox/private.md\n');
    const owners = await d.nas('diff', 'demo@vault');
    expect(owners.stdout).toContain('+SECRET-PRIVATE');
    expect(owners.stdout).toContain('+INBOX-TASK');

    // The briefing carries AGENTS.md, MEMORY.md and memory/resident.md: the 0600 one stays out, and so does the inbox.
    const briefing = await asAgent(token, 'briefing', 'demo@vault');
    expect(briefing.code, briefing.stderr).toBe(0);
    expect(briefing.stdout).toContain('=== AGENTS.md ===');
    expect(briefing.stdout).not.toMatch(/RESIDENT-SECRET|task\.md/);
    expect((await d.nas('briefing', 'demo@vault')).stdout).toMatch(/RESIDENT-SECRET[\s\S]*inbox\/task\.md/);

    const log = await asAgent(token, 'log', 'demo@vault', 'outbox/private.md');
    expect(log.code).not.toBe(0);
    expect(log.stderr).toMatch(/you could not read outbox\/private\.md through the mount of demo@vault/);
    expect((await asAgent(token, 'log', 'demo@vault', 'outbox/theirs.md')).code).toBe(0);
    expect((await d.nas('log', 'demo@vault', 'outbox/private.md')).code).toBe(0);

    const pr = await d.nasJson('propose', 'demo/vault', '--into', 'main', '--intent', 'vault');
    const shown = await asAgent(token, '--json', 'pr', 'show', 'demo', String(pr.id));
    expect(shown.code, shown.stderr).toBe(0);
    const detail = JSON.parse(shown.stdout);
    expect(detail.diff).toContain('+THEIRS-TEXT');
    expect(detail.diff).not.toMatch(/SECRET-PRIVATE|INBOX-TASK/);
    expect(detail.withheld).toEqual(['inbox/task.md', 'memory/resident.md', 'outbox/private.md']);
    expect(detail.files.find((f: { path: string }) => f.path === 'outbox/private.md')).toMatchObject({ withheld: true, afterMode: '100600' });
    expect((await d.nasJson('pr', 'show', 'demo', String(pr.id))).diff).toContain('+SECRET-PRIVATE');
  });

  it('restores for a lease holder only what its principal could read at that commit', async () => {
    await branch('vault2');
    await fs.writeFile(p('vault2', 'outbox/hidden2.md'), 'SECRET-TWO\n');
    await fs.chmod(p('vault2', 'outbox/hidden2.md'), 0o600);
    await fs.writeFile(p('vault2', 'outbox/open2.md'), 'OPEN-TWO\n');
    await d.sync('demo/vault2');
    await branch('borrow');
    const token = await lease('demo/borrow', '--principal', String(AGENT));
    const out = await restoreJson({ NAS_LEASE: token, owner: false }, 'demo@borrow', await head('vault2'), '--path', 'outbox/hidden2.md', '--path', 'outbox/open2.md');
    expect(out.restored).toEqual(['outbox/open2.md']);
    expect(out.refused).toEqual([{ path: 'outbox/hidden2.md', reason: expect.stringMatching(/you could not read it at [0-9a-f]{12} through the mount, so it is not restored/) }]);
    await expect(fs.access(p('borrow', 'outbox/hidden2.md'))).rejects.toThrow(/ENOENT/);
    expect((await d.git('cat-file', '-e', 'borrow:outbox/hidden2.md')).code).not.toBe(0);
    expect((await cat(p('borrow', 'outbox/open2.md'))).stdout).toBe('OPEN-TWO\n');
  });

  it('shows a run what its user may read, and counts it as read: a PR of a run that read the inbox through nas diff waits', async () => {
    const before = await head('main');
    await d.pushToMain({ 'inbox/task-7.md': 'INBOX-SEVEN\n' }, 'a task arrives');
    const after = await head('main');
    const nas = `${process.execPath} ${CLI}`;
    const r = await run(process.execPath, [CLI, '--socket', d.socket, 'run', '--json', 'demo', '--user', 'nobody', '--intent', 'summarise', '--', 'sh', '-c',
      // Main's inbox is its owner's: withheld. The run's own branch holds the same task, its user's to read.
      `${nas} diff demo > ${shared}/main-diff 2>&1; ` +
      `${nas} diff demo@$NAS_BRANCH ${before} ${after} > ${shared}/own-diff 2>&1; ` +
      'echo summary > outbox/summary-7.md'],
    { env: { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' } });
    expect(r.stdout, r.stderr).not.toBe('');
    const out = JSON.parse(r.stdout);
    const mainDiff = await fs.readFile(`${shared}/main-diff`, 'utf8');
    expect(mainDiff).not.toContain('INBOX-SEVEN');
    expect(mainDiff).toContain('withheld (you could not read them through the mount): inbox/task-7.md');
    expect(await fs.readFile(`${shared}/own-diff`, 'utf8')).toContain('+INBOX-SEVEN');
    expect(out.pr).toMatchObject({ state: 'waiting', reasons: ['the run read untrusted input: inbox/task-7.md'] });
    expect((await d.nasJson('pr', 'show', 'demo', String(out.pr.id))).reads).toMatch(/ inbox\/task-7\.md$/m);
    expect((await d.git('cat-file', '-e', 'main:outbox/summary-7.md')).code).not.toBe(0);
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

  it('shows owner-, mode- and time-only changes as such in nas diff and nas pr show (owners by name), and a new folder as added', async () => {
    // Files made through the mount, merged: main holds their metadata records.
    await branch('meta0');
    for (const f of ['a', 'b', 'c']) await fs.writeFile(p('meta0', `outbox/meta-${f}.txt`), `${f}${f}${f}\n`);
    const first = await d.nasJson('propose', 'demo/meta0', '--into', 'main', '--intent', 'three files');
    expect(first.state).toBe('merged');
    await branch('meta');
    await fs.chmod(p('meta', 'outbox/meta-a.txt'), 0o755);
    await fs.chown(p('meta', 'outbox/meta-b.txt'), 65534, 65534);
    const then = new Date('2020-01-02T03:04:05Z');
    await fs.utimes(p('meta', 'outbox/meta-c.txt'), then, then);
    await fs.mkdir(p('meta', 'outbox/meta-new'));
    await fs.writeFile(p('meta', 'outbox/meta-new/x.md'), 'x\n');
    await d.sync('demo/meta');

    const expected = {
      a: 'diff --git a/outbox/meta-a.txt b/outbox/meta-a.txt\nold mode 100644\nnew mode 100755\n',
      b: 'diff --git a/outbox/meta-b.txt b/outbox/meta-b.txt\nowner root -> nobody\ngroup root -> nogroup\n',
      c: /diff --git a\/outbox\/meta-c\.txt b\/outbox\/meta-c\.txt\nmtime 20\d\d-\d\d-\d\dT[\d:.]+Z -> 2020-01-02T03:04:05Z\natime 20\d\d-\d\d-\d\dT[\d:.]+Z -> 2020-01-02T03:04:05Z\n/,
    };
    const diff = await d.nas('diff', 'demo@meta');
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toContain(', 4 file(s) and 1 folder(s) changed\nfolder outbox/meta-new/ added\n');
    expect(diff.stdout).toContain(expected.a);
    expect(diff.stdout).toContain(expected.b);
    expect(diff.stdout).toMatch(expected.c);
    // Every file counted has its piece of the patch.
    expect(diff.stdout.match(/^diff --git /gm)).toHaveLength(4);
    const report = await d.nasJson('diff', 'demo@meta');
    expect(report.changes.find((c: { path: string }) => c.path === 'outbox/meta-b.txt')).toEqual({
      path: 'outbox/meta-b.txt', status: 'modified',
      meta: [{ field: 'owner', before: 'root', after: 'nobody' }, { field: 'group', before: 'root', after: 'nogroup' }],
    });
    expect(report.changes.find((c: { path: string }) => c.path === 'outbox/meta-a.txt').meta).toEqual([{ field: 'mode', before: '100644', after: '100755' }]);
    expect(report.folders).toEqual([{ path: 'outbox/meta-new', status: 'added' }]);

    const pr = await d.nasJson('propose', 'demo/meta', '--into', 'main', '--intent', 'metadata');
    expect(pr.changes).toMatchObject({ added: 2, modified: 3, deleted: 0 });
    expect(pr.changes.paths).toContain('A outbox/meta-new/');
    expect(pr.changes.paths).not.toContain('M outbox/meta-new/');
    const text = await d.nas('pr', 'show', 'demo', String(pr.id));
    expect(text.stdout).toContain('changes: 2 added, 3 modified, 0 deleted\nfolder outbox/meta-new/ added\n');
    expect(text.stdout).toContain(expected.a);
    expect(text.stdout).toContain(expected.b);
    expect(text.stdout).toMatch(expected.c);
    const detail = await d.nasJson('pr', 'show', 'demo', String(pr.id));
    expect(detail.files.find((f: { path: string }) => f.path === 'outbox/meta-b.txt')).toMatchObject({
      beforeMode: '100644', afterMode: '100644', meta: [{ field: 'owner', before: 'root', after: 'nobody' }, { field: 'group', before: 'root', after: 'nogroup' }],
    });
    expect(detail.files.find((f: { path: string }) => f.path === 'outbox/meta-c.txt').meta.map((m: { field: string }) => m.field)).toEqual(['mtime', 'atime']);
    expect(detail.folders).toEqual([{ path: 'outbox/meta-new', status: 'added' }]);
  });
});
