import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, run } from '../helpers.js';

/** Main is protected: readable by everyone, every mutation EROFS, also for root. */
describe('main view', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('lists one entry per Home and shows the template layout', async () => {
    expect(await fs.readdir(d.mnt)).toEqual(['demo']);
    const names = (await fs.readdir(d.path('demo'))).sort();
    expect(names).toEqual(['.gitignore', '.nas', 'AGENTS.md', 'CLAUDE.md', 'inbox', 'memory', 'outbox', 'skills', 'workspace']);
    expect((await fs.readdir(d.path('demo', 'memory'))).sort()).toEqual(['MEMORY.md', 'journal', 'notes', 'quarantine']);
    expect((await fs.readdir(d.path('demo', '.nas'))).sort()).toEqual(['limits.yaml', 'maintenance.yaml', 'merge.yaml', 'policy.yaml', 'role.yaml']);
    expect(await fs.readlink(d.path('demo', 'CLAUDE.md'))).toBe('AGENTS.md');
    expect(await fs.readFile(d.path('demo', 'CLAUDE.md'), 'utf8')).toContain('# demo');
    const st = await fs.stat(d.path('demo', 'AGENTS.md'));
    expect(st.size).toBe((await fs.readFile(d.path('demo', 'AGENTS.md'))).length);
    expect(st.mode & 0o777).toBe(0o644);
  });

  it('refuses every mutating operation with EROFS', async () => {
    const p = (rel: string) => d.path('demo', rel);
    const attempts: [string, () => Promise<unknown>][] = [
      ['create', () => fs.writeFile(p('new.md'), 'x')],
      ['overwrite', () => fs.writeFile(p('AGENTS.md'), 'x')],
      ['append', () => fs.appendFile(p('AGENTS.md'), 'x')],
      ['open r+', () => fs.open(p('AGENTS.md'), 'r+').then((h) => h.close())],
      ['truncate', () => fs.truncate(p('AGENTS.md'), 0)],
      ['unlink', () => fs.unlink(p('AGENTS.md'))],
      ['mkdir', () => fs.mkdir(p('newdir'))],
      ['rmdir', () => fs.rmdir(p('skills'))],
      ['rename', () => fs.rename(p('AGENTS.md'), p('B.md'))],
      ['symlink', () => fs.symlink('AGENTS.md', p('link'))],
      ['link', () => fs.link(p('AGENTS.md'), p('hard'))],
      ['chmod', () => fs.chmod(p('AGENTS.md'), 0o600)],
      ['chown', () => fs.chown(p('AGENTS.md'), 1000, 1000)],
      ['utimes', () => fs.utimes(p('AGENTS.md'), new Date(0), new Date(0))],
      ['write in workspace', () => fs.writeFile(p('workspace/x'), 'x')],
    ];
    for (const [what, attempt] of attempts) expect([what, await codeOf(attempt())]).toEqual([what, 'EROFS']);
    // The shell sees the same, and nothing changed.
    const sh = await run('sh', ['-c', `echo hi > ${p('x.md')}`]);
    expect(sh.code).not.toBe(0);
    expect(sh.stderr).toMatch(/Read-only file system/);
    expect((await d.git('log', '--oneline', 'main')).stdout.trim().split('\n')).toHaveLength(1);
  });

  it('reports the space of the disk that holds the Homes (df works)', async () => {
    const st = await fs.statfs(d.path('demo'));
    const state = await fs.statfs(d.state);
    expect(st.blocks).toBe(state.blocks);
    expect(st.bsize).toBe(state.bsize);
    expect((await run('df', [d.mnt])).code).toBe(0);
  });

  it('answers ENOENT for names that are not Homes or branches', async () => {
    expect(await codeOf(fs.stat(d.path('nobody')))).toBe('ENOENT');
    expect(await codeOf(fs.stat(d.path('demo@nobranch')))).toBe('ENOENT');
    expect(await codeOf(fs.mkdir(d.path('newhome')))).toBe('EROFS');
  });
});
