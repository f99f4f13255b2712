import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { TestDaemon, run } from '../helpers.js';

/** The tools agents actually run, inside a branch view, with what lands in git checked each time. */
describe('real tools in a branch view', () => {
  let d: TestDaemon;
  let native: string;
  const p = (rel: string) => d.path('demo@tools', rel);
  const tree = async () => (await d.git('ls-tree', '-r', '--name-only', 'tools')).stdout;
  const sync = async () => expect((await d.nas('sync', 'demo/tools')).code).toBe(0);

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    expect((await d.nas('branch', 'create', 'demo/tools')).code).toBe(0);
    // A small project on a native disk: nested folders, an executable, a symlink, a binary file.
    native = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-native-'));
    await fs.mkdir(`${native}/proj/src/lib`, { recursive: true });
    await fs.writeFile(`${native}/proj/README.md`, '# proj\n');
    await fs.writeFile(`${native}/proj/src/main.ts`, 'console.log(1)\n');
    await fs.writeFile(`${native}/proj/src/lib/util.ts`, 'export const x = 1;\n');
    await fs.writeFile(`${native}/proj/build.sh`, '#!/bin/sh\necho build\n', { mode: 0o755 });
    await fs.writeFile(`${native}/proj/blob.bin`, randomBytes(300_000));
    await fs.symlink('src/main.ts', `${native}/proj/entry`);
  });
  afterAll(async () => {
    await d?.cleanup();
    if (native) await fs.rm(native, { recursive: true, force: true });
  });

  it('sed -i edits a versioned file in place', async () => {
    const r = await run('sed', ['-i', 's/^# demo$/# demo (edited by sed)/', p('AGENTS.md')]);
    expect(r.code, r.stderr).toBe(0);
    await sync();
    expect((await d.git('show', 'tools:AGENTS.md')).stdout.split('\n')[0]).toBe('# demo (edited by sed)');
    expect(await tree()).not.toMatch(/sed\w{6}/);
  });

  it("an editor's save by temp file, fsync and rename", async () => {
    const script = `
import os
path = ${JSON.stringify(p('memory/MEMORY.md'))}
tmp = os.path.join(os.path.dirname(path), '.MEMORY.md.tmp')
old = open(path).read()
with open(tmp, 'w') as f:
    f.write(old + 'saved by editor\\n')
    f.flush()
    os.fsync(f.fileno())
os.rename(tmp, path)
`;
    const r = await run('python3', ['-c', script]);
    expect(r.code, r.stderr).toBe(0);
    await sync();
    expect((await d.git('show', 'tools:memory/MEMORY.md')).stdout).toMatch(/saved by editor\n$/);
    expect(await tree()).not.toContain('.MEMORY.md.tmp');
  });

  it('tar x unpacks a tree that then matches the original', async () => {
    expect((await run('tar', ['-cf', `${native}/proj.tar`, '-C', native, 'proj'])).code).toBe(0);
    const r = await run('tar', ['-xf', `${native}/proj.tar`, '-C', p('outbox')]);
    expect(r.code, r.stderr).toBe(0);
    const diff = await run('diff', ['-r', `${native}/proj`, p('outbox/proj')]);
    expect(diff.code, diff.stdout).toBe(0);
    await sync();
    const files = await tree();
    for (const f of ['README.md', 'src/main.ts', 'src/lib/util.ts', 'build.sh', 'blob.bin', 'entry']) expect(files).toContain(`outbox/proj/${f}`);
    expect((await d.git('ls-tree', 'tools', 'outbox/proj/build.sh')).stdout).toMatch(/^100755/);
    expect((await d.git('ls-tree', 'tools', 'outbox/proj/entry')).stdout).toMatch(/^120000/);
  });

  it('rsync -a copies a tree in, and a second run finds nothing to change', async () => {
    const r = await run('rsync', ['-a', `${native}/proj/`, p('outbox/synced/')]);
    expect(r.code, r.stderr).toBe(0);
    expect((await run('diff', ['-r', `${native}/proj`, p('outbox/synced')])).code).toBe(0);
    await sync();
    expect(await tree()).toContain('outbox/synced/src/lib/util.ts');
    const again = await run('rsync', ['-a', '--checksum', '--itemize-changes', `${native}/proj/`, p('outbox/synced/')]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout.split('\n').filter((l) => /^[<>c]f/.test(l))).toEqual([]);
  });

  it('cp -r copies a tree out of the view and back in', async () => {
    // The tree tar unpacked into the view (on its own, this test unpacks it first).
    if (!(await fs.stat(p('outbox/proj')).catch(() => null))) {
      expect((await run('tar', ['-cf', `${native}/proj.tar`, '-C', native, 'proj'])).code).toBe(0);
      expect((await run('tar', ['-xf', `${native}/proj.tar`, '-C', p('outbox')])).code).toBe(0);
    }
    expect((await run('cp', ['-r', p('outbox/proj'), `${native}/copy`])).code).toBe(0);
    expect((await run('diff', ['-r', `${native}/proj`, `${native}/copy`])).code).toBe(0);
    expect((await run('cp', ['-r', `${native}/copy`, p('outbox/copied')])).code).toBe(0);
    await sync();
    expect(await tree()).toContain('outbox/copied/src/main.ts');
  });

  it('git init, add, commit and status inside workspace/', async () => {
    const repo = p('workspace/repo');
    await fs.mkdir(repo);
    const git = (...args: string[]) => run('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args], { cwd: repo });
    expect((await git('init', '-q')).code).toBe(0);
    expect((await run('cp', ['-r', `${native}/proj/.`, repo])).code).toBe(0);
    for (let i = 0; i < 50; i++) await fs.writeFile(`${repo}/f${i}.txt`, `${i}\n`);
    const add = await git('add', '-A');
    expect(add.code, add.stderr).toBe(0);
    const commit = await git('commit', '-q', '-m', 'inside the mount');
    expect(commit.code, commit.stderr).toBe(0);
    expect((await git('status', '--porcelain')).stdout).toBe('');
    expect((await git('log', '--oneline')).stdout).toContain('inside the mount');
    const fsck = await git('fsck', '--no-progress');
    expect(fsck.code, fsck.stderr).toBe(0);
    await sync();
    expect(await tree()).not.toContain('workspace');
  });

  it('refuses git init in a versioned folder', async () => {
    await fs.mkdir(p('outbox/repo'));
    const r = await run('git', ['init', '-q', p('outbox/repo')]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Operation not permitted/);
  });
});
