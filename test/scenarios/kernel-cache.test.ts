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
    // Committed first: a file made and deleted within 250 ms leaves nothing in the recycle area.
    await ok('sync', 'demo/back');
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

  it('a tree made, changed and listed through the mount reads right at every step (the listings the binding keeps)', async () => {
    await ok('branch', 'create', 'demo/tree');
    const t = d.path('demo@tree', 'outbox/t');
    const dropCaches = () => exec('sh', ['-c', 'echo 2 > /proc/sys/vm/drop_caches']);
    /** Each name with its size and permissions, as `ls -l` (a listing with attributes) and stat(2) give them. */
    const shown = async (rel: string) => {
      const ls = (await exec('ls', ['-ln', `${t}/${rel}`])).stdout.split('\n').slice(1).filter(Boolean)
        .map((l) => l.split(/\s+/)).map((f) => `${f[8]} ${f[4]} ${f[0].slice(1, 10)}`);
      const stats = await Promise.all((await fs.readdir(`${t}/${rel}`)).sort().map(async (n) => {
        const st = await fs.lstat(`${t}/${rel}/${n}`);
        return `${n} ${st.isDirectory() ? 'dir' : st.size} ${(st.mode & 0o777).toString(8)}`;
      }));
      return { ls: ls.filter((l) => !l.startsWith('dir ')).map((l) => l.replace(/ \d+ (d\S+)$/, ' dir $1')), stats };
    };
    const expectShown = async (rel: string, entries: string[]) => {
      for (let pass = 0; pass < 2; pass++) {
        const { ls, stats } = await shown(rel);
        expect(stats, `stat of ${rel} (pass ${pass})`).toEqual(entries.map((e) => e.split(' ').slice(0, 3).join(' ')));
        expect(ls.map((l) => l.split(' ')[0]), `ls -l of ${rel} (pass ${pass})`).toEqual(entries.map((e) => e.split(' ')[0]));
        for (const e of entries.filter((x) => x.split(' ')[3])) expect(ls, `ls -l of ${rel}`).toContain(`${e.split(' ')[0]} ${e.split(' ')[1]} ${e.split(' ')[3]}`);
        await dropCaches(); // the second pass: from what the binding kept
      }
    };
    await fs.mkdir(`${t}/a/b`, { recursive: true });
    await fs.writeFile(`${t}/a/f1`, '12345');
    await expectShown('a', ['b dir 755', 'f1 5 644 rw-r--r--']);
    await fs.writeFile(`${t}/a/f2`, '1234567');
    await fs.appendFile(`${t}/a/f1`, '678');
    await expectShown('a', ['b dir 755', 'f1 8 644', 'f2 7 644']);
    await fs.chmod(`${t}/a/f1`, 0o700);
    await expectShown('a', ['b dir 755', 'f1 8 700 rwx------', 'f2 7 644']);
    await fs.rename(`${t}/a/f2`, `${t}/a/f3`);
    await expectShown('a', ['b dir 755', 'f1 8 700', 'f3 7 644']);
    await fs.rename(`${t}/a/f3`, `${t}/a/b/f4`);
    await expectShown('a', ['b dir 755', 'f1 8 700']);
    await expectShown('a/b', ['f4 7 644']);
    await expect(fs.stat(`${t}/a/f3`)).rejects.toMatchObject({ code: 'ENOENT' });
    await fs.rename(`${t}/a/f1`, `${t}/a/b/f4`); // over an existing name
    await fs.unlink(`${t}/a/b/f4`).then(() => fs.writeFile(`${t}/a/b/f4`, 'xy'));
    await fs.symlink('f4', `${t}/a/b/s`);
    await fs.mkdir(`${t}/a/c`);
    await fs.rmdir(`${t}/a/c`);
    await fs.truncate(`${t}/a/b/f4`, 1);
    await expectShown('a', ['b dir 755']);
    await expectShown('a/b', ['f4 1 644', 's 2 777']);
    // What the branch committed says the same.
    await ok('sync', 'demo/tree');
    expect((await d.git('ls-tree', '-r', '-l', 'tree', 'outbox/t')).stdout.trim().split('\n').map((l) => l.split(/\s+/).slice(3).join(' ')))
      .toEqual(['1 outbox/t/a/b/f4', '2 outbox/t/a/b/s']);
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
