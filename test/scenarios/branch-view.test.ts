import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { constants } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';

/** Branch views: copy-on-write over git, writes become commits, policy at the syscall level, recycle area. */
describe('branch view', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@draft', rel);
  const show = async (rev: string) => (await d.git('show', rev)).stdout;
  const exists = (path: string) => fs.stat(path).then(() => true, () => false);
  const committed = (rel: string) => eventually(async () => (await d.git('cat-file', '-e', `draft:${rel}`)).code === 0, `${rel} committed`);

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    const r = await d.nas('branch', 'create', 'demo/draft', '--from', 'main', '--ttl', '48h');
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('shows the branch beside main and serves unchanged files from git without copying them', async () => {
    expect((await fs.readdir(d.mnt)).sort()).toEqual(['demo', 'demo@draft']);
    expect(await fs.readFile(p('AGENTS.md'), 'utf8')).toBe(await fs.readFile(d.path('demo', 'AGENTS.md'), 'utf8'));
    const upper = await fs.readdir(`${d.state}/homes/demo.git/nas/branches/draft/upper`);
    expect(upper).toEqual(['workspace']);
  });

  it('turns a closed file in a versioned folder into a commit naming the path', async () => {
    await fs.writeFile(p('outbox/x.md'), 'hi\n');
    await committed('outbox/x.md');
    expect(await show('draft:outbox/x.md')).toBe('hi\n');
    const log = (await d.git('log', '-1', '--format=%s%n%b%n%cn <%ce>', 'draft')).stdout;
    expect(log).toContain('outbox/x.md');
    expect(log).toContain('Nas-Branch: draft');
    expect(log).toContain('nasd <nasd@localhost>');
    // main is untouched and does not see it
    expect((await d.git('log', '--oneline', 'main')).stdout.trim().split('\n')).toHaveLength(1);
    expect(await codeOf(fs.stat(d.path('demo', 'outbox/x.md')))).toBe('ENOENT');
  });

  it('keeps workspace/ as scratch: readable and writable, never committed', async () => {
    await fs.mkdir(p('workspace/build'), { recursive: true });
    await fs.writeFile(p('workspace/build/out.bin'), randomBytes(10_000));
    await fs.writeFile(p('memory/notes/keep.md'), 'kept\n');
    expect((await d.nas('sync', 'demo/draft')).code).toBe(0);
    const files = (await d.git('ls-tree', '-r', '--name-only', 'draft')).stdout;
    expect(files).toContain('memory/notes/keep.md');
    expect(files).not.toContain('workspace');
    expect((await fs.stat(p('workspace/build/out.bin'))).size).toBe(10_000);
  });

  it('copies a file up on first write and keeps the rest of it', async () => {
    await fs.appendFile(p('AGENTS.md'), 'one more rule\n');
    await eventually(async () => (await show('draft:AGENTS.md')).endsWith('one more rule\n'), 'AGENTS.md committed');
    expect(await show('draft:AGENTS.md')).toBe((await show('main:AGENTS.md')) + 'one more rule\n');
  });

  it('keeps the exec bit, symlinks and renames in git', async () => {
    await fs.writeFile(p('skills/run.sh'), '#!/bin/sh\necho ok\n');
    await fs.chmod(p('skills/run.sh'), 0o755);
    await fs.symlink('run.sh', p('skills/latest'));
    await fs.mkdir(p('outbox/reports/2026'), { recursive: true });
    await fs.writeFile(p('outbox/reports/2026/q1.md'), 'q1\n');
    await fs.rename(p('outbox/reports'), p('outbox/archive'));
    await d.sync('demo/draft');
    const tree = (await d.git('ls-tree', '-r', 'draft')).stdout;
    expect(tree).toMatch(/100755 blob \S+\tskills\/run.sh/);
    expect(tree).toMatch(/120000 blob \S+\tskills\/latest/);
    expect(tree).toContain('outbox/archive/2026/q1.md');
    expect(tree).not.toContain('outbox/reports');
    expect(await fs.readlink(p('skills/latest'))).toBe('run.sh');
    // renaming a directory that exists only in git moves everything it holds
    await fs.rename(p('memory/quarantine'), p('memory/held'));
    expect(await fs.readdir(p('memory/held'))).toEqual(['README.md']);
    await d.sync('demo/draft');
    const after = (await d.git('ls-tree', '-r', '--name-only', 'draft')).stdout;
    expect(after).toContain('memory/held/README.md');
    expect(after).not.toContain('memory/quarantine');
    await fs.rename(p('memory/held'), p('memory/quarantine'));
  });

  it('renames over an existing file, as editors do when they save', async () => {
    await fs.writeFile(p('outbox/doc.md'), 'v1\n');
    await fs.writeFile(p('outbox/.doc.md.swp'), 'v2\n');
    await fs.rename(p('outbox/.doc.md.swp'), p('outbox/doc.md'));
    expect(await fs.readFile(p('outbox/doc.md'), 'utf8')).toBe('v2\n');
    await d.sync('demo/draft');
    expect(await show('draft:outbox/doc.md')).toBe('v2\n');
    expect((await d.git('ls-tree', '-r', '--name-only', 'draft')).stdout).not.toContain('.doc.md.swp');
  });

  it('makes the journal append-only, like chattr +a', async () => {
    const log = p('memory/journal/2026-11-30.md');
    await fs.appendFile(log, 'first\n');
    await fs.appendFile(log, 'second\n');
    expect(await fs.readFile(log, 'utf8')).toBe('first\nsecond\n');
    expect(await codeOf(fs.writeFile(log, 'rewritten\n'))).toBe('EPERM');
    expect(await codeOf(fs.truncate(log, 0))).toBe('EPERM');
    expect(await codeOf(fs.unlink(log))).toBe('EPERM');
    expect(await codeOf(fs.rename(log, p('memory/journal/other.md')))).toBe('EPERM');
    expect(await codeOf(fs.rename(log, p('outbox/stolen.md')))).toBe('EPERM');
    expect(await codeOf(fs.open(log, constants.O_WRONLY).then((h) => h.close()))).toBe('EPERM');
    expect(await codeOf(fs.unlink(p('memory/journal/README.md')))).toBe('EPERM');
    const sh = await run('sh', ['-c', `echo third >> ${log} && echo nope > ${log}`]);
    expect(sh.stderr).toMatch(/Operation not permitted/);
    expect(await fs.readFile(log, 'utf8')).toBe('first\nsecond\nthird\n');
    await d.sync('demo/draft');
    expect(await show('draft:memory/journal/2026-11-30.md')).toBe('first\nsecond\nthird\n');
  });

  it('makes .nas/ read-only in branch views', async () => {
    // A file to move into .nas/ (an earlier test may have made it already).
    if (!(await exists(p('outbox/doc.md')))) await fs.writeFile(p('outbox/doc.md'), 'v2\n');
    expect(await codeOf(fs.writeFile(p('.nas/policy.yaml'), 'read_only: []\n'))).toBe('EPERM');
    expect(await codeOf(fs.appendFile(p('.nas/limits.yaml'), 'x: 1\n'))).toBe('EPERM');
    expect(await codeOf(fs.writeFile(p('.nas/new.yaml'), 'x\n'))).toBe('EPERM');
    expect(await codeOf(fs.unlink(p('.nas/role.yaml')))).toBe('EPERM');
    expect(await codeOf(fs.rename(p('.nas/role.yaml'), p('role.yaml')))).toBe('EPERM');
    expect(await codeOf(fs.rename(p('outbox/doc.md'), p('.nas/doc.md')))).toBe('EPERM');
    expect(await codeOf(fs.chmod(p('.nas/role.yaml'), 0o777))).toBe('EPERM');
  });

  it('refuses what git cannot hold in versioned folders, with a clear errno', async () => {
    // A file to link to and set an xattr on (an earlier test may have made it already).
    if (!(await exists(p('outbox/x.md')))) await fs.writeFile(p('outbox/x.md'), 'hi\n');
    expect(await codeOf(fs.mkdir(p('outbox/.git')))).toBe('EPERM');
    expect(await codeOf(fs.writeFile(p('outbox/x.md.hard'), 'x').then(() => fs.link(p('outbox/x.md'), p('outbox/hard'))))).toBe('EPERM');
    expect((await run('mkfifo', [p('outbox/fifo')])).code).not.toBe(0);
    expect(await codeOf(fs.stat(p('outbox/fifo')))).toBe('ENOENT');
    const xattr = await run('python3', ['-c', `import os; os.setxattr(${JSON.stringify(p('outbox/x.md'))}, 'user.k', b'v')`]);
    expect(xattr.stderr).toMatch(/Operation not supported/);
    // in scratch, a nested repository and hard links are fine
    await fs.mkdir(p('workspace/repo/.git'), { recursive: true });
    await fs.writeFile(p('workspace/a'), 'a');
    await fs.link(p('workspace/a'), p('workspace/b'));
    expect(await fs.readFile(p('workspace/b'), 'utf8')).toBe('a');
  });

  it('returns from fsync only after the commit exists', async () => {
    // A long batching window: the commit can only come from fsync itself.
    const slow = await TestDaemon.start({ windowMs: 60_000, extraArgs: ['--demo'] });
    try {
      expect((await slow.nas('branch', 'create', 'demo/draft')).code).toBe(0);
      const fh = await fs.open(slow.path('demo@draft', 'outbox/synced.md'), 'w');
      await fh.write('durable\n');
      await fh.sync();
      expect((await slow.git('show', 'draft:outbox/synced.md')).stdout).toBe('durable\n');
      await fh.close();
      // many closes inside one window become one commit
      for (let i = 0; i < 20; i++) await fs.writeFile(slow.path('demo@draft', `outbox/batch-${i}.md`), `${i}\n`);
      const before = (await slow.git('rev-list', '--count', 'draft')).stdout.trim();
      await slow.sync('demo/draft');
      expect(Number((await slow.git('rev-list', '--count', 'draft')).stdout)).toBe(Number(before) + 1);
      // (outbox/ only: each file's metadata record under .nas-meta/ is in the same commit)
      expect((await slow.git('show', '--stat', '--format=%s', 'draft', '--', 'outbox')).stdout).toContain('20 files changed');
    } finally {
      await slow.cleanup();
    }
  });

  it('sends deletes to the recycle area and restores them byte for byte', async () => {
    const data = randomBytes(200_000);
    await fs.writeFile(p('outbox/data.bin'), data);
    await committed('outbox/data.bin');
    await fs.unlink(p('outbox/data.bin'));
    await fs.unlink(p('inbox/README.md')); // never copied up: its content comes from git
    await eventually(async () => (await d.git('cat-file', '-e', 'draft:outbox/data.bin')).code !== 0, 'deletion committed');
    const trash = await d.nasJson<any[]>('trash', 'list', 'demo');
    const rec = trash.find((t) => t.path === 'outbox/data.bin');
    expect(rec).toMatchObject({ branch: 'draft', kind: 'file', size: 200_000 });
    expect(Date.parse(rec.deletedAt)).toBeGreaterThan(Date.now() - 60_000);
    const text = (await d.nas('trash', 'list', 'demo')).stdout;
    expect(text).toContain('outbox/data.bin');
    expect(text).toContain('inbox/README.md');

    const restored = await d.nas('trash', 'restore', 'demo', 'outbox/data.bin', '--branch', 'draft');
    expect(restored.code, restored.stderr).toBe(0);
    expect((await fs.readFile(p('outbox/data.bin'))).equals(data)).toBe(true);
    const blob = await d.git('cat-file', 'blob', 'draft:outbox/data.bin');
    expect(blob.code).toBe(0);
    expect((await d.nas('trash', 'restore', 'demo', 'inbox/README.md')).code).toBe(0);
    expect(await fs.readFile(p('inbox/README.md'), 'utf8')).toBe(await fs.readFile(d.path('demo', 'inbox/README.md'), 'utf8'));

    // Restoring over an existing path is refused, and nothing changes; --to puts it elsewhere.
    await fs.writeFile(p('outbox/data.bin'), 'newer\n');
    const refused = await d.nas('trash', 'restore', 'demo', 'outbox/data.bin', '--branch', 'draft');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/exists in demo@draft.*--to/);
    expect(await fs.readFile(p('outbox/data.bin'), 'utf8')).toBe('newer\n');
    expect((await d.nas('trash', 'restore', 'demo', 'outbox/data.bin', '--to', 'outbox/old/data.bin')).code).toBe(0);
    expect((await fs.readFile(p('outbox/old/data.bin'))).equals(data)).toBe(true);
    const missing = await d.nas('trash', 'restore', 'demo', 'outbox/never.md');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/nothing in the recycle area/);
  });

  it('records rm -r of a directory, files and directories alike', async () => {
    await fs.mkdir(p('outbox/tree/sub'), { recursive: true });
    await fs.writeFile(p('outbox/tree/sub/a.md'), 'a\n');
    await fs.writeFile(p('outbox/tree/b.md'), 'b\n');
    await d.sync('demo/draft');
    expect((await run('rm', ['-r', p('outbox/tree')])).code).toBe(0);
    expect(await codeOf(fs.stat(p('outbox/tree')))).toBe('ENOENT');
    await d.sync('demo/draft');
    expect((await d.git('ls-tree', '-r', '--name-only', 'draft')).stdout).not.toContain('outbox/tree');
    const paths = (await d.nasJson<any[]>('trash', 'list', 'demo')).map((t) => `${t.kind}:${t.path}`);
    expect(paths).toEqual(expect.arrayContaining(['file:outbox/tree/sub/a.md', 'file:outbox/tree/b.md', 'dir:outbox/tree/sub', 'dir:outbox/tree']));
  });

  it('loses nothing when several processes write at once', async () => {
    const script = (w: number) => `for i in $(seq 1 100); do echo "writer ${w} file $i" > ${p('outbox/par')}/w${w}-$i.md; done`;
    await fs.mkdir(p('outbox/par'));
    const results = await Promise.all([1, 2, 3, 4].map((w) => run('sh', ['-c', script(w)])));
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    await d.sync('demo/draft');
    const files = (await d.git('ls-tree', '--name-only', 'draft', 'outbox/par/')).stdout.trim().split('\n');
    expect(files).toHaveLength(400);
    expect((await d.gitBlob('draft:outbox/par/w3-77.md')).toString()).toBe('writer 3 file 77\n');
  });

  it('deletes a directory from git, then lets a new one take its name without the old contents', async () => {
    expect((await run('rm', ['-r', p('skills')])).code).toBe(0);
    await fs.mkdir(p('skills'));
    await fs.writeFile(p('skills/new.md'), 'new\n');
    expect(await fs.readdir(p('skills'))).toEqual(['new.md']);
    await d.sync('demo/draft');
    const files = (await d.git('ls-tree', '-r', '--name-only', 'draft', 'skills')).stdout.trim().split('\n');
    expect(files).toEqual(['skills/new.md']);
  });
});
