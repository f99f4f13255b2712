import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { constants } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';

/**
 * Sequences that land in one commit window (the window here is a minute: only `nas sync` commits), where
 * the order of deletions and writes inside a single commit matters.
 */
describe('changes within one commit window', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@w', rel);
  const tree = async () => (await d.git('ls-tree', '-r', '--name-only', 'w')).stdout.trim().split('\n');
  const sync = async () => expect((await d.nas('sync', 'demo/w')).code).toBe(0);

  beforeAll(async () => {
    d = await TestDaemon.start({ windowMs: 60_000, extraArgs: ['--demo'] });
    expect((await d.nas('branch', 'create', 'demo/w')).code).toBe(0);
    await fs.mkdir(p('outbox/d'));
    await fs.writeFile(p('outbox/d/f'), 'old\n');
    await fs.mkdir(p('outbox/a'));
    await fs.writeFile(p('outbox/a/b'), 'b\n');
    await sync();
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('keeps a file written into a directory that was just deleted and re-created', async () => {
    expect((await run('rm', ['-rf', p('outbox/d')])).code).toBe(0);
    await fs.mkdir(p('outbox/d'));
    await fs.writeFile(p('outbox/d/f'), 'new\n');
    await sync();
    expect((await d.gitBlob('w:outbox/d/f')).toString()).toBe('new\n');
  });

  it('keeps a file written where a directory was just deleted', async () => {
    expect((await run('rm', ['-rf', p('outbox/a')])).code).toBe(0);
    await fs.writeFile(p('outbox/a'), 'a file now\n');
    await sync();
    expect((await d.gitBlob('w:outbox/a')).toString()).toBe('a file now\n');
  });

  it('commits what an open file writes after it was renamed, under its new name', async () => {
    const fh = await fs.open(p('outbox/log.md'), 'w');
    await fh.write('line1\n');
    await fs.rename(p('outbox/log.md'), p('outbox/log1.md'));
    await fh.write('line2\n');
    await fh.close();
    await sync();
    expect((await d.gitBlob('w:outbox/log1.md')).toString()).toBe('line1\nline2\n');
    expect(await tree()).not.toContain('outbox/log.md');
  });

  it('files an open file that is deleted under its own name', async () => {
    await fs.writeFile(p('outbox/open.md'), 'still open\n');
    // Committed first: a file made and deleted within one commit window never reaches the recycle area (below).
    await sync();
    const fh = await fs.open(p('outbox/open.md'), 'r');
    await fs.unlink(p('outbox/open.md'));
    expect((await fh.read(Buffer.alloc(64), 0, 64, 0)).bytesRead).toBe(11);
    await fh.close();
    await sync();
    expect((await tree()).filter((f) => f.includes('fuse_hidden'))).toEqual([]);
    const trash = await d.nasJson<any[]>('trash', 'list', 'demo');
    expect(trash.map((t) => t.path)).toContain('outbox/open.md');
  });

  it("files nothing in the recycle area for a file made and deleted within 250 ms (an editor's AGENTS.md.tmp), open or not", async () => {
    const before = (await d.nasJson<any[]>('trash', 'list', 'demo', '--all')).length;
    await fs.writeFile(p('AGENTS.md.tmp'), 'draft\n');
    await fs.unlink(p('AGENTS.md.tmp'));
    const fh = await fs.open(p('outbox/scratchpad.md'), 'w+');
    await fh.write('notes\n');
    await fs.unlink(p('outbox/scratchpad.md'));
    expect((await fh.read(Buffer.alloc(16), 0, 16, 0)).bytesRead).toBe(6);
    await fh.close();
    await fs.mkdir(p('outbox/tmpdir'));
    await fs.writeFile(p('outbox/tmpdir/x'), 'x\n');
    await fs.rm(p('outbox/tmpdir'), { recursive: true });
    // A file no commit holds that lived longer (a log still open when deleted) is filed: only the transient goes.
    const log = await fs.open(p('outbox/long.log'), 'w');
    await log.write('an hour of lines\n');
    await new Promise((r) => setTimeout(r, 1100));
    await fs.unlink(p('outbox/long.log'));
    await log.close();
    // A committed file renamed, then deleted at once, is filed: only what a create made is transient.
    await fs.writeFile(p('outbox/report.md'), 'the report\n');
    await sync();
    await fs.rename(p('outbox/report.md'), p('outbox/report.old'));
    await fs.unlink(p('outbox/report.old'));
    // A committed file deleted after is filed as ever, with what it held when deleted.
    await fs.writeFile(p('outbox/kept.md'), 'v1\n');
    await sync();
    await fs.writeFile(p('outbox/kept.md'), 'v2\n');
    await fs.unlink(p('outbox/kept.md'));
    await sync();
    const trash = await d.nasJson<any[]>('trash', 'list', 'demo', '--all');
    expect(trash.slice(0, trash.length - before).map((t) => t.path)).toEqual(['outbox/kept.md', 'outbox/report.old', 'outbox/long.log']);
    expect((await d.gitBlob(trash[0].oid)).toString()).toBe('v2\n');
    expect((await d.gitBlob(trash[1].oid)).toString()).toBe('the report\n');
    expect((await d.gitBlob(trash[2].oid)).toString()).toBe('an hour of lines\n');
    const files = await tree();
    for (const gone of ['AGENTS.md.tmp', 'outbox/scratchpad.md', 'outbox/tmpdir/x', 'outbox/kept.md', 'outbox/report.md', 'outbox/report.old']) expect(files).not.toContain(gone);
  });

  it('does not bring back a file renamed while the commit adding it is under way', async () => {
    // A 64 MiB file keeps the commit busy hashing for a while; the rename lands in the middle of it. The
    // daemon's open descriptors show when that is: the commit reads big.bin from the upper directory
    // read-only (the write handle was read-write), so the commit has taken its list of paths, f.tmp included.
    const upperBig = `${d.state}/homes/demo.git/nas/branches/w/upper/outbox/big.bin`;
    const daemonFds = async (): Promise<number[]> => {
      const fdDir = `/proc/${d.child.pid}/fd`;
      const modes: number[] = [];
      for (const fd of await fs.readdir(fdDir).catch(() => [])) {
        if ((await fs.readlink(`${fdDir}/${fd}`).catch(() => '')) !== upperBig) continue;
        const info = await fs.readFile(`/proc/${d.child.pid}/fdinfo/${fd}`, 'utf8').catch(() => '');
        const flags = /^flags:\s+([0-7]+)/m.exec(info);
        if (flags) modes.push(parseInt(flags[1], 8) & 3);
      }
      return modes;
    };
    const head = async () => (await d.git('rev-parse', 'w')).stdout.trim();
    await fs.writeFile(p('outbox/f.tmp'), 'draft\n');
    await fs.writeFile(p('outbox/big.bin'), randomBytes(64 << 20));
    // The kernel releases a closed file asynchronously: wait until the write handle is gone.
    await eventually(async () => (await daemonFds()).length === 0, 'the write handle of big.bin to be released');
    const before = await head();
    let returned = false;
    const syncing = d.nas('sync', 'demo/w').then((r) => {
      returned = true;
      return r;
    });
    await eventually(async () => (await daemonFds()).includes(constants.O_RDONLY), 'the commit to be hashing big.bin', 30_000);
    expect(returned).toBe(false);
    expect(await head()).toBe(before); // the commit has not landed
    await fs.rename(p('outbox/f.tmp'), p('outbox/f.md'));
    expect(returned).toBe(false); // the sync was still waiting for that commit when the rename returned
    expect((await syncing).code).toBe(0);
    // The commit under way did add the old name: the rename really happened in the middle of it.
    expect((await d.git('ls-tree', '--name-only', 'w', 'outbox/')).stdout).toContain('outbox/f.tmp');
    await sync();
    const files = await tree();
    expect(files).toContain('outbox/f.md');
    expect(files).not.toContain('outbox/f.tmp');
    expect(await codeOf(fs.stat(p('outbox/f.tmp')))).toBe('ENOENT');
    await fs.unlink(p('outbox/big.bin'));
  });

  it('refuses to move a directory that holds the journal, or to move one into it', async () => {
    await fs.appendFile(p('memory/journal/j.md'), 'entry\n');
    expect(await codeOf(fs.rename(p('memory'), p('m2')))).toBe('EPERM');
    await fs.mkdir(p('outbox/forged'));
    await fs.writeFile(p('outbox/forged/j.md'), 'forged\n');
    expect(await codeOf(fs.rename(p('outbox/forged'), p('memory/journal/forged')))).toBe('EPERM');
    expect(await codeOf(fs.rename(p('skills'), p('.nas/skills')))).toBe('EPERM');
    // an ordinary directory moves
    await fs.rename(p('outbox/forged'), p('outbox/fine'));
    await sync();
    expect(await tree()).toContain('outbox/fine/j.md');
    expect((await d.gitBlob('w:memory/journal/j.md')).toString()).toBe('entry\n');
  });
});
