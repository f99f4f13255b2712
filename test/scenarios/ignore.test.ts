import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, run } from '../helpers.js';

/** What .gitignore matches (and git does not track) is scratch in the branch: on disk, never committed. */
describe('ignore rules', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@ign', rel);
  const tree = async () => (await d.git('ls-tree', '-r', '--name-only', 'ign')).stdout.trim().split('\n');
  const sync = async () => {
    const r = await d.nas('sync', 'demo/ign');
    expect(r.code, r.stderr).toBe(0);
  };
  const write = async (rel: string, text = `${rel}\n`) => {
    await fs.mkdir(p(rel.slice(0, rel.lastIndexOf('/'))), { recursive: true });
    await fs.writeFile(p(rel), text);
  };

  beforeAll(async () => {
    d = await TestDaemon.withBranch('ign');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('keeps what the template .gitignore names out of history, wherever it is', async () => {
    await write('outbox/app/index.js');
    await write('outbox/app/node_modules/left-pad/index.js');
    await write('node_modules/.bin/tool');
    await write('outbox/app/__pycache__/m.cpython-311.pyc');
    await write('outbox/notes.md.swp');
    await sync();
    const files = await tree();
    expect(files).toContain('outbox/app/index.js');
    expect(files.filter((f) => /node_modules|__pycache__|\.swp$/.test(f))).toEqual([]);
    // Still there for the tools that made them.
    expect(await fs.readFile(p('outbox/app/node_modules/left-pad/index.js'), 'utf8')).toBe('outbox/app/node_modules/left-pad/index.js\n');
  });

  it('shows scratch bytes beside versioned bytes in nas branch list', async () => {
    await write('outbox/weights/node_modules/big.bin', 'x'.repeat(100_000));
    await write('workspace/tmp.bin', 'y'.repeat(50_000));
    await sync();
    const branches = await d.nasJson<{ name: string; bytes: { scratch: number; versioned: number } }[]>('branch', 'list', 'demo');
    const bytes = branches.find((b) => b.name === 'ign')!.bytes;
    expect(bytes.scratch).toBeGreaterThanOrEqual(150_000);
    expect(bytes.versioned).toBeLessThan(100_000);
    expect((await d.nas('branch', 'list', 'demo')).stdout).toMatch(/VERSIONED\s+SCRATCH/);
  });

  it('follows nested .gitignore files and negation, as git does', async () => {
    await write('outbox/logs/.gitignore', '*.log\n!keep.log\n');
    await write('outbox/logs/a.log');
    await write('outbox/logs/keep.log');
    await write('outbox/logs/sub/deep.log');
    await write('outbox/logs/readme.md');
    await write('outbox/other.log');
    await sync();
    const files = await tree();
    expect(files).toEqual(expect.arrayContaining(['outbox/logs/.gitignore', 'outbox/logs/keep.log', 'outbox/logs/readme.md', 'outbox/other.log']));
    expect(files).not.toContain('outbox/logs/a.log');
    expect(files).not.toContain('outbox/logs/sub/deep.log');
  });

  it('cannot re-include a file below an ignored directory', async () => {
    await write('outbox/re/.gitignore', 'build/\n!build/keep.txt\n');
    await write('outbox/re/build/keep.txt');
    await sync();
    expect((await tree()).filter((f) => f.startsWith('outbox/re/build'))).toEqual([]);
  });

  it('keeps committing a tracked file that a later rule matches, as git does', async () => {
    await write('outbox/tracked.tmp', 'one\n');
    await sync();
    expect(await tree()).toContain('outbox/tracked.tmp');
    await write('outbox/.gitignore', '*.tmp\n');
    await write('outbox/tracked.tmp', 'two\n');
    await write('outbox/new.tmp', 'never\n');
    await sync();
    expect((await d.gitBlob('ign:outbox/tracked.tmp')).toString()).toBe('two\n');
    expect(await tree()).not.toContain('outbox/new.tmp');
  });

  // That ignored paths hold what git cannot (hard links, nested repositories, FIFOs, sockets, device nodes) as a
  // disk does is checked by test/posix, whose cases all run in an ignored folder too.
  it('deletes ignored paths without the recycle area, nested repositories and hard links included', async () => {
    await fs.mkdir(p('node_modules/dep/.git'), { recursive: true });
    await write('node_modules/dep/a.js');
    await fs.link(p('node_modules/dep/a.js'), p('node_modules/dep/b.js'));
    const before = (await d.nasJson<unknown[]>('trash', 'list', 'demo')).length;
    expect((await run('rm', ['-rf', p('node_modules')])).code).toBe(0);
    await sync();
    expect(await fs.readdir(p(''))).not.toContain('node_modules');
    expect((await d.nasJson<unknown[]>('trash', 'list', 'demo')).length).toBe(before);
  });

  it('commits what stops being ignored when the rule is removed, untouched', async () => {
    await write('outbox/later/.gitignore', 'x.txt\n');
    await write('outbox/later/x.txt', 'kept aside\n');
    await sync();
    expect(await tree()).not.toContain('outbox/later/x.txt');
    await fs.unlink(p('outbox/later/.gitignore'));
    await sync();
    expect((await d.gitBlob('ign:outbox/later/x.txt')).toString()).toBe('kept aside\n');
  });

  it('never lets a .gitignore hide a protected path: the journal stays versioned', async () => {
    await write('memory/.gitignore', 'journal/\n');
    const fh = await fs.open(p('memory/journal/run.md'), 'a');
    await fh.write('appended\n');
    await fh.close();
    await sync();
    expect(await tree()).toContain('memory/journal/run.md');
  });
});
