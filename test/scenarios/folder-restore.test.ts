import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, eventually, run } from '../helpers.js';

/**
 * A folder deleted with `rm -r` comes back whole from the recycle area or an older commit, and every path in it
 * with the owner, mode and times it had (its metadata record), not root's and the restore's time.
 */
describe('restoring deleted folders and their files metadata', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@work', rel);
  const T1 = new Date('2021-03-04T05:06:07Z');
  const T2 = new Date('2020-01-02T03:04:05Z');
  const T3 = new Date('2019-06-07T08:09:10Z');

  beforeAll(async () => {
    d = await TestDaemon.withBranch('work');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  /** A folder of files with owners, modes and times of their own; the folder's own set last. */
  async function makeFolder(dir: string): Promise<void> {
    await fs.mkdir(p(`${dir}/sub`), { recursive: true });
    await fs.writeFile(p(`${dir}/a.txt`), 'alpha\n');
    await fs.writeFile(p(`${dir}/sub/b.sh`), '#!/bin/sh\necho b\n');
    await fs.writeFile(p(`${dir}/sub/c.bin`), Buffer.from([0, 1, 2, 255, 254]));
    await fs.chmod(p(`${dir}/a.txt`), 0o640);
    await fs.chown(p(`${dir}/a.txt`), 1234, 2345);
    await fs.chmod(p(`${dir}/sub/b.sh`), 0o750);
    await fs.chown(p(`${dir}/sub/b.sh`), 1235, 2346);
    await fs.utimes(p(`${dir}/a.txt`), T1, T1);
    await fs.utimes(p(`${dir}/sub/b.sh`), T2, T2);
    await fs.utimes(p(`${dir}/sub/c.bin`), T3, T3);
    await fs.chmod(p(`${dir}/sub`), 0o710);
    await fs.chown(p(`${dir}/sub`), 1236, 2347);
    await fs.utimes(p(`${dir}/sub`), T2, T2);
    await fs.chmod(p(dir), 0o750);
    await fs.utimes(p(dir), T1, T1);
    await d.sync('demo/work');
  }

  /** Every file of makeFolder's back, byte for byte, with its owner, mode and modification time; the folders' too. */
  async function expectFolder(dir: string): Promise<void> {
    await eventually(async () => fs.access(p(`${dir}/sub/c.bin`)).then(() => true, () => false), `${dir}/sub/c.bin to be back`);
    expect(await fs.readFile(p(`${dir}/a.txt`), 'utf8')).toBe('alpha\n');
    expect(await fs.readFile(p(`${dir}/sub/b.sh`), 'utf8')).toBe('#!/bin/sh\necho b\n');
    expect([...(await fs.readFile(p(`${dir}/sub/c.bin`)))]).toEqual([0, 1, 2, 255, 254]);
    const a = await fs.lstat(p(`${dir}/a.txt`));
    expect({ mode: a.mode & 0o7777, uid: a.uid, gid: a.gid, mtime: a.mtimeMs }).toEqual({ mode: 0o640, uid: 1234, gid: 2345, mtime: T1.getTime() });
    const b = await fs.lstat(p(`${dir}/sub/b.sh`));
    expect({ mode: b.mode & 0o7777, uid: b.uid, gid: b.gid, mtime: b.mtimeMs }).toEqual({ mode: 0o750, uid: 1235, gid: 2346, mtime: T2.getTime() });
    expect((await fs.lstat(p(`${dir}/sub/c.bin`))).mtimeMs).toBe(T3.getTime());
    const sub = await fs.lstat(p(`${dir}/sub`));
    expect({ mode: sub.mode & 0o7777, uid: sub.uid, gid: sub.gid, mtime: sub.mtimeMs }).toEqual({ mode: 0o710, uid: 1236, gid: 2347, mtime: T2.getTime() });
    const top = await fs.lstat(p(dir));
    expect({ mode: top.mode & 0o7777, mtime: top.mtimeMs }).toEqual({ mode: 0o750, mtime: T1.getTime() });
  }

  it('trash restore brings a folder back whole, each file with its owner, mode and times', async () => {
    await makeFolder('outbox/rs');
    // Deleted before the rm -r, with a write in the folder since: not part of the folder's deletion.
    await fs.writeFile(p('outbox/rs/old.txt'), 'deleted long before\n');
    await d.sync('demo/work');
    await fs.unlink(p('outbox/rs/old.txt'));
    await fs.writeFile(p('outbox/rs/later.txt'), 'written after that\n');
    await fs.utimes(p('outbox/rs'), T1, T1);
    await d.sync('demo/work');
    const rm = await run('rm', ['-r', p('outbox/rs')]);
    expect(rm.code, rm.stderr).toBe(0);
    await d.sync('demo/work');
    const r = await d.nasJson('trash', 'restore', 'demo', 'outbox/rs', '--branch', 'work');
    expect(r.contents).toEqual(['outbox/rs/a.txt', 'outbox/rs/later.txt', 'outbox/rs/sub', 'outbox/rs/sub/b.sh', 'outbox/rs/sub/c.bin']);
    await expectFolder('outbox/rs');
    expect(await fs.readFile(p('outbox/rs/later.txt'), 'utf8')).toBe('written after that\n');
    await expect(fs.access(p('outbox/rs/old.txt'))).rejects.toThrow();
    // Committed as restored: the records in git say the same.
    expect((await d.gitBlob('work:.nas-meta/outbox/rs/a.txt')).toString()).toMatch(/^mode=100640 uid=1234 gid=2345 .* mtime=1614834367\.000000000/);
    expect((await d.gitBlob('work:outbox/rs/sub/c.bin')).length).toBe(5);
  });

  it('trash restore --to puts the folder and everything deleted with it elsewhere', async () => {
    await run('rm', ['-r', p('outbox/rs')]);
    await d.sync('demo/work');
    const r = await d.nasJson('trash', 'restore', 'demo', 'outbox/rs', '--branch', 'work', '--to', 'outbox/rs2');
    expect(r.to).toBe('outbox/rs2');
    await expectFolder('outbox/rs2');
  });

  it('nas restore --path DIR brings a deleted folder back from a commit with each path metadata record', async () => {
    await makeFolder('outbox/hist');
    const commit = (await d.git('rev-parse', 'work')).stdout.trim();
    await run('rm', ['-r', p('outbox/hist')]);
    await d.sync('demo/work');
    const r = await d.nasJson('restore', 'demo@work', commit.slice(0, 12), '--path', 'outbox/hist');
    expect(r.restored).toEqual(['outbox/hist/a.txt', 'outbox/hist/sub/b.sh', 'outbox/hist/sub/c.bin']);
    expect(r.refused).toEqual([]);
    await expectFolder('outbox/hist');
  });

  it('a single file restored from the recycle area gets its owner, mode and times back', async () => {
    await fs.writeFile(p('outbox/one.txt'), 'just one\n');
    await fs.chmod(p('outbox/one.txt'), 0o604);
    await fs.chown(p('outbox/one.txt'), 4321, 5432);
    await fs.utimes(p('outbox/one.txt'), T3, T3);
    await d.sync('demo/work');
    await fs.unlink(p('outbox/one.txt'));
    await d.sync('demo/work');
    await d.nasJson('trash', 'restore', 'demo', 'outbox/one.txt', '--branch', 'work');
    await eventually(async () => fs.access(p('outbox/one.txt')).then(() => true, () => false), 'one.txt to be back');
    const st = await fs.lstat(p('outbox/one.txt'));
    expect({ mode: st.mode & 0o7777, uid: st.uid, gid: st.gid, mtime: st.mtimeMs }).toEqual({ mode: 0o604, uid: 4321, gid: 5432, mtime: T3.getTime() });
    expect(await fs.readFile(p('outbox/one.txt'), 'utf8')).toBe('just one\n');
  });
});
