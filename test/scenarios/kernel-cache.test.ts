import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { TestDaemon, eventually, exec } from '../helpers.js';

/**
 * The kernel keeps names, attributes, listings and pages for an hour (and the binding its own cache): whatever
 * nasd changes on its own must show through the mount at once, with no sleep. Each case reads first (so the
 * kernel holds the old state), has nasd change it, then reads again straight away.
 */
describe('kernel cache: what nasd changes shows at once', () => {
  let d: TestDaemon;
  const ok = async (...args: string[]) => {
    const r = await d.nas(...args);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout;
  };
  const names = async (view: string, rel = '') => (await fs.readdir(d.path(view, rel))).sort();

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    await d.pushToMain({ 'outbox/note.md': 'two\n', 'outbox/gone.md': 'bye\n' }, 'files main will change');
    await eventually(async () => (await names('demo', 'outbox')).includes('note.md'), 'main to show the pushed files');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('main after a merge: new bytes at their new size, a removed file gone, a new one listed', async () => {
    await ok('branch', 'create', 'demo/merge');
    expect(await fs.readFile(d.path('demo', 'outbox/note.md'), 'utf8')).toBe('two\n');
    expect((await fs.stat(d.path('demo', 'outbox/gone.md'))).size).toBe(4);
    expect(await names('demo', 'outbox')).not.toContain('new.md');

    await fs.writeFile(d.path('demo@merge', 'outbox/note.md'), 'two two, and longer\n');
    await fs.unlink(d.path('demo@merge', 'outbox/gone.md'));
    await fs.writeFile(d.path('demo@merge', 'outbox/new.md'), 'new\n');
    await ok('propose', 'demo/merge', '--intent', 'change main');
    // A delete waits for a person: approving it merges.
    const waiting = (await d.nasJson<{ id: number; state: string }[]>('pr', 'list', 'demo')).filter((pr) => pr.state === 'waiting');
    for (const pr of waiting) await ok('pr', 'approve', 'demo', String(pr.id));
    expect((await d.gitBlob('main:outbox/note.md')).toString()).toBe('two two, and longer\n');

    // Synchronous reads: the old size would cut the new bytes ("two " for "two two").
    expect(readFileSync(d.path('demo', 'outbox/note.md'), 'utf8')).toBe('two two, and longer\n');
    expect((await fs.stat(d.path('demo', 'outbox/note.md'))).size).toBe(20);
    await expect(fs.stat(d.path('demo', 'outbox/gone.md'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await names('demo', 'outbox')).toEqual(expect.arrayContaining(['new.md', 'note.md']));
    expect(await names('demo', 'outbox')).not.toContain('gone.md');
  });

  it("main after an operator's push (nasd follows the ref within its watch)", async () => {
    expect(await fs.readFile(d.path('demo', 'outbox/note.md'), 'utf8')).toBe('two two, and longer\n');
    await d.pushToMain({ 'outbox/note.md': 'pushed by the operator, much longer than before\n' }, 'operator change');
    const pushed = 'pushed by the operator, much longer than before\n';
    await eventually(async () => (await fs.readFile(d.path('demo', 'outbox/note.md'), 'utf8')) === pushed, 'main to show the push');
  });

  it('the root listing: a branch and a checkpoint appear at once, a discarded branch leaves at once', async () => {
    expect(await names('')).not.toContain('demo@fresh');
    await ok('branch', 'create', 'demo/fresh');
    expect(await names('')).toContain('demo@fresh');
    expect((await fs.stat(d.path('demo@fresh'))).isDirectory()).toBe(true);
    await ok('checkpoint', 'create', 'demo', 'cp1');
    expect(await names('')).toContain('demo:cp1');
    expect(await names('demo:cp1', 'outbox')).toContain('note.md');
    await ok('branch', 'discard', 'demo/fresh');
    expect(await names('')).not.toContain('demo@fresh');
    await expect(fs.stat(d.path('demo@fresh'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a branch after a trash restore and after nas restore', async () => {
    await ok('branch', 'create', 'demo/back');
    const file = d.path('demo@back', 'outbox/keep.md');
    await fs.writeFile(file, 'kept\n');
    await fs.unlink(file);
    expect(await names('demo@back', 'outbox')).not.toContain('keep.md');
    await eventually(async () => (await ok('trash', 'list', 'demo')).includes('outbox/keep.md'), 'the delete in the recycle area');
    await ok('trash', 'restore', 'demo', 'outbox/keep.md', '--branch', 'back');
    expect(await names('demo@back', 'outbox')).toContain('keep.md');
    expect(readFileSync(file, 'utf8')).toBe('kept\n');

    // nas restore puts the checkpoint's version back over what the branch has now.
    await fs.writeFile(d.path('demo@back', 'outbox/note.md'), 'x\n');
    expect(readFileSync(d.path('demo@back', 'outbox/note.md'), 'utf8')).toBe('x\n');
    await ok('restore', 'demo@back', 'cp1', '--path', 'outbox/note.md');
    expect(readFileSync(d.path('demo@back', 'outbox/note.md'), 'utf8')).toBe('pushed by the operator, much longer than before\n');
  });

  it('a branch after nas branch update (main merged into it)', async () => {
    await ok('branch', 'create', 'demo/behind');
    expect(readFileSync(d.path('demo@behind', 'outbox/note.md'), 'utf8')).toBe('pushed by the operator, much longer than before\n');
    await d.pushToMain({ 'outbox/note.md': 'main moved\n' }, 'main moves on');
    await ok('branch', 'update', 'demo/behind');
    expect(readFileSync(d.path('demo@behind', 'outbox/note.md'), 'utf8')).toBe('main moved\n');
    expect((await fs.stat(d.path('demo@behind', 'outbox/note.md'))).size).toBe(11);
  });

  it('what requests change shows at once too: a rewound listing, a hard link\'s count, a size written through a held descriptor', async () => {
    await ok('branch', 'create', 'demo/live');
    const dir = d.path('demo@live', 'outbox');
    // A directory stream rewound after a create (os.listdir on a descriptor rewinds it), then a fresh listing.
    const py = `import os,sys
d=sys.argv[1]; fd=os.open(d, os.O_RDONLY|os.O_DIRECTORY)
before=os.listdir(fd); open(os.path.join(d,'late.md'),'w').write('x')
print('late.md' in before, 'late.md' in os.listdir(fd), 'late.md' in os.listdir(d))`;
    expect((await exec('python3', ['-c', py, dir])).stdout).toBe('False True True\n');
    // Hard links live in ignored paths: the other name's link count drops when one goes.
    const ignored = d.path('demo@live', 'node_modules');
    await fs.mkdir(ignored);
    await fs.writeFile(`${ignored}/f`, 'f');
    await fs.link(`${ignored}/f`, `${ignored}/g`);
    expect((await fs.stat(`${ignored}/f`)).nlink).toBe(2);
    expect((await fs.stat(`${ignored}/g`)).nlink).toBe(2);
    await fs.unlink(`${ignored}/f`);
    expect((await fs.stat(`${ignored}/g`)).nlink).toBe(1);
    // Written through a descriptor held open across listings: ls -l and a new reader see the new size.
    const held = await fs.open(`${dir}/held.md`, 'a');
    try {
      await held.write('0123456789');
      expect((await exec('ls', ['-l', dir])).stdout).toMatch(/ 10 .* held\.md/);
      await held.write('abcde');
      await exec('sh', ['-c', 'echo 2 > /proc/sys/vm/drop_caches']);
      expect((await exec('ls', ['-l', dir])).stdout).toMatch(/ 15 .* held\.md/);
      expect((await exec('wc', ['-c', `${dir}/held.md`])).stdout).toMatch(/^15 /);
    } finally {
      await held.close();
    }
  });
});
