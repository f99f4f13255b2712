import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, eventually } from '../helpers.js';

/** `nas branch update`: main merged into a branch as a commit on it, conflicts left in the files with markers. */
describe('branch update', () => {
  let d: TestDaemon;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const rev = async (spec: string) => (await d.git('rev-parse', spec)).stdout.trim();
  const lease = async (spec: string, scopes = 'write,propose:main') => {
    const r = await d.nas('lease', 'issue', spec, '--principal', 'alice', '--scopes', scopes);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  const asLease = (token: string, ...args: string[]) => d.nasWith({ NAS_LEASE: token, owner: false }, ...args);
  const branch = async (name: string, ...flags: string[]) => {
    const r = await d.nas('branch', 'create', `demo/${name}`, ...flags);
    expect(r.code, r.stderr).toBe(0);
  };

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    await d.pushToMain({
      'outbox/shared.md': 'one\ntwo\nthree\nfour\n',
      'outbox/clash.md': 'a\nb\nc\n',
      'memory/journal/log.md': 'start\n',
    }, 'files both sides will change');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it("brings main's changes into the branch as a merge commit, shown through the mount at once (a write lease)", async () => {
    await branch('catchup');
    const token = await lease('demo/catchup');
    // The branch changes the first line of a file (its copy sits in the upper directory) and adds one of its own.
    await fs.writeFile(p('catchup', 'outbox/shared.md'), 'ONE\ntwo\nthree\nfour\n');
    expect((await fs.stat(p('catchup', 'outbox/shared.md'))).size).toBe(19);
    await fs.writeFile(p('catchup', 'outbox/mine.md'), 'mine\n');
    await d.pushToMain({ 'outbox/shared.md': 'one\ntwo\nthree\nFOUR, longer on main\n', 'outbox/theirs.md': 'from main\n' }, 'main moves on');
    const main = await rev('main');

    // Looked at just before: what the kernel keeps of it must not hide the update.
    expect((await fs.stat(p('catchup', 'outbox/shared.md'))).size).toBe(19);
    const r = await asLease(token, '--json', 'branch', 'update', 'demo/catchup');
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ view: 'demo@catchup', main, upToDate: false, conflicts: [] });
    // One commit on the branch, with both heads as parents: the branch's (with what was pending) and main's.
    expect(await rev('catchup')).toBe(out.head);
    const [, first, second] = (await d.git('rev-list', '--parents', '-n', '1', 'catchup')).stdout.trim().split(' ');
    expect(second).toBe(main);
    expect((await d.gitBlob(`${first}:outbox/mine.md`)).toString()).toBe('mine\n');
    expect((await d.git('log', '-1', '--format=%B', 'catchup')).stdout).toMatch(/^Merge main into catchup\n\nNas-Branch: catchup\nNas-Main: [0-9a-f]{40}\n/);
    // Read through the mount straight away: main's new file, and the file both changed with both changes.
    expect(await fs.readFile(p('catchup', 'outbox/theirs.md'), 'utf8')).toBe('from main\n');
    expect(await fs.readFile(p('catchup', 'outbox/shared.md'), 'utf8')).toBe('ONE\ntwo\nthree\nFOUR, longer on main\n');
    expect(await fs.readFile(p('catchup', 'outbox/mine.md'), 'utf8')).toBe('mine\n');

    const again = await asLease(token, 'branch', 'update', 'demo/catchup');
    expect(again.stdout, again.stderr).toMatch(/^demo@catchup already has everything on main \([0-9a-f]+\)\n$/);
    expect(await rev('catchup')).toBe(out.head);

    // Proposed now, the PR holds only the branch's own changes, and merges without conflict.
    const pr = JSON.parse((await asLease(token, '--json', 'propose', 'demo/catchup', '--into', 'main', '--intent', 'caught up')).stdout);
    expect(pr.state).toBe('merged');
    expect(pr.changes.paths.sort()).toEqual(['A outbox/mine.md', 'M outbox/shared.md']);
    expect((await d.gitBlob('main:outbox/shared.md')).toString()).toBe('ONE\ntwo\nthree\nFOUR, longer on main\n');
  });

  it('leaves both sides between markers, lists the file, and refuses to propose until they are edited away (the owner)', async () => {
    await branch('clash');
    await fs.writeFile(p('clash', 'outbox/clash.md'), 'a\nB from the branch\nc\n');
    await fs.appendFile(p('clash', 'memory/journal/log.md'), 'branch entry\n');
    await d.pushToMain({ 'outbox/clash.md': 'a\nB from main\nc\n', 'memory/journal/log.md': 'start\nmain entry\n' }, 'main changes the same line');

    expect((await fs.stat(p('clash', 'outbox/clash.md'))).size).toBe(22);
    const r = await d.nas('branch', 'update', 'demo/clash');
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/^merged main \([0-9a-f]+\) into demo@clash: [0-9a-f]+, 2 file\(s\) changed on both sides:\n/);
    expect(r.stdout).toContain('  conflict markers: outbox/clash.md\n');
    expect(r.stdout).toContain("  main's version, then the branch's additions: memory/journal/log.md\n");
    expect(r.stdout).toMatch(/edit the conflict markers away/);
    const marked = 'a\n<<<<<<< clash\nB from the branch\n=======\nB from main\n>>>>>>> main\nc\n';
    expect(await fs.readFile(p('clash', 'outbox/clash.md'), 'utf8')).toBe(marked);
    expect((await d.gitBlob('clash:outbox/clash.md')).toString()).toBe(marked);
    expect(await fs.readFile(p('clash', 'memory/journal/log.md'), 'utf8')).toBe('start\nmain entry\nbranch entry\n');
    expect((await d.git('rev-list', '--parents', '-n', '1', 'clash')).stdout.trim().split(' ')).toHaveLength(3);

    const prs = (await d.nasJson<any[]>('pr', 'list', 'demo')).length;
    const refused = await d.nas('propose', 'demo/clash', '--into', 'main', '--intent', 'both sides');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/demo@clash still holds the conflict markers nas branch update left .* in outbox\/clash\.md: edit each file/);
    expect((await d.nasJson<any[]>('pr', 'list', 'demo')).length).toBe(prs);

    await fs.writeFile(p('clash', 'outbox/clash.md'), 'a\nB from both\nc\n');
    const pr = await d.nasJson('propose', 'demo/clash', '--into', 'main', '--intent', 'both sides');
    expect(pr.state).toBe('merged');
    expect((await d.gitBlob('main:outbox/clash.md')).toString()).toBe('a\nB from both\nc\n');
    expect((await d.gitBlob('main:memory/journal/log.md')).toString()).toBe('start\nmain entry\nbranch entry\n');
  });

  it('leaves a binary file both changed for a person: listed, exit 1, no propose until a side is picked; the loser recycled', async () => {
    const blob = (n: number) => Buffer.from([0, 0xff, 0x10, n, 0, 0xfe]);
    await d.pushToMain({ 'outbox/blob2.bin': blob(0), 'outbox/blob3.bin': blob(0) }, 'two binary files');
    for (const b of ['first', 'second']) await branch(b);
    const token = await lease('demo/second');
    await fs.writeFile(p('first', 'outbox/blob2.bin'), blob(1));
    await fs.writeFile(p('second', 'outbox/blob2.bin'), blob(2));
    await fs.writeFile(p('second', 'outbox/blob3.bin'), blob(2));
    await fs.rm(p('first', 'outbox/blob3.bin'));
    const first = await d.nasJson('propose', 'demo/first', '--into', 'main', '--intent', 'the first version');
    // A binary change waits for the owner by policy.
    if (first.state === 'waiting') expect((await d.nas('pr', 'approve', 'demo', String(first.id))).code).toBe(0);

    const r = await asLease(token, 'branch', 'update', 'demo/second');
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain("  UNRESOLVED, the branch's version kept: outbox/blob2.bin (it is not text, so it cannot hold both versions)\n");
    expect(r.stdout).toContain("  UNRESOLVED, the branch's version kept: outbox/blob3.bin (main deleted it, the branch changed it)\n");
    expect(r.stdout).toMatch(/nas branch resolve demo\/second <path> --take branch\|main/);
    const refused = await asLease(token, 'propose', 'demo/second', '--into', 'main', '--intent', 'the second version');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/files an update left for a person to decide \(outbox\/blob2\.bin, outbox\/blob3\.bin\)/);
    expect((await d.gitBlob('main:outbox/blob2.bin')).equals(blob(1))).toBe(true);

    // A side that is not one, or a path that is not unresolved: refused, nothing changed.
    expect((await asLease(token, 'branch', 'resolve', 'demo/second', 'outbox/blob2.bin', '--take', 'theirs')).stderr).toMatch(/--take branch .* or --take main/);
    expect((await asLease(token, 'branch', 'resolve', 'demo/second', 'outbox/other.md', '--take', 'main')).stderr).toMatch(/outbox\/other\.md is not unresolved in demo@second; unresolved: outbox\/blob2\.bin, outbox\/blob3\.bin/);

    // Main's version of one taken: it shows at once, and the branch's goes to the recycle area.
    const took = await asLease(token, '--json', 'branch', 'resolve', 'demo/second', 'outbox/blob2.bin', '--take', 'main');
    expect(took.code, took.stderr).toBe(0);
    expect(JSON.parse(took.stdout)).toMatchObject({ took: 'main', recycled: true, unresolved: ['outbox/blob3.bin'] });
    expect((await fs.readFile(p('second', 'outbox/blob2.bin'))).equals(blob(1))).toBe(true);
    // The branch's own of the other kept: main's deletion loses, nothing to recycle.
    const kept = await asLease(token, 'branch', 'resolve', 'demo/second', 'outbox/blob3.bin', '--take', 'branch');
    expect(kept.stdout).toMatch(/the branch's version stays\nnothing left unresolved: the branch can be proposed\n/);
    const trash = await d.nasJson<{ path: string; branch: string; size: number }[]>('trash', 'list', 'demo');
    expect(trash.filter((t) => t.branch === 'second').map((t) => [t.path, t.size])).toEqual([['outbox/blob2.bin', 6]]);

    const pr = await d.nasJson('propose', 'demo/second', '--into', 'main', '--intent', 'the second version, sides picked');
    if (pr.state === 'waiting') expect((await d.nas('pr', 'approve', 'demo', String(pr.id))).code).toBe(0);
    expect((await d.gitBlob('main:outbox/blob2.bin')).equals(blob(1))).toBe(true);
    expect((await d.gitBlob('main:outbox/blob3.bin')).equals(blob(2))).toBe(true);
  });

  it('refuses a caller without a write lease on the branch, and changes nothing', async () => {
    await branch('guarded');
    await d.pushToMain({ 'outbox/later.md': 'later\n' }, 'something to update with');
    const head = await rev('guarded');
    const none = await d.nasWith({ owner: false }, 'branch', 'update', 'demo/guarded');
    expect(none.code).not.toBe(0);
    expect(none.stderr).toMatch(/updating demo\/guarded from main needs a lease that grants write on demo\/guarded/);
    const other = await asLease(await lease('demo/clash'), 'branch', 'update', 'demo/guarded');
    expect(other.stderr).toMatch(/updating demo\/guarded from main refused: .*is for the branch clash, not guarded/);
    const readOnly = await asLease(await lease('demo/guarded', 'propose:main'), 'branch', 'update', 'demo/guarded');
    expect(readOnly.stderr).toMatch(/updating demo\/guarded from main refused: .*write/);
    expect(await rev('guarded')).toBe(head);
    await expect(fs.access(p('guarded', 'outbox/later.md'))).rejects.toThrow(/ENOENT/);
  });

  it('refuses an expired branch', async () => {
    await branch('lapsed', '--ttl', '1s');
    await eventually(async () => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'lapsed' && b.expired), 'the branch to expire', 15_000);
    await d.pushToMain({ 'outbox/late.md': 'late\n' }, 'main moves after the expiry');
    const head = await rev('lapsed');
    const r = await d.nas('branch', 'update', 'demo/lapsed');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/demo@lapsed expired \(its TTL passed\): it takes no changes/);
    expect(await rev('lapsed')).toBe(head);
  });
});
