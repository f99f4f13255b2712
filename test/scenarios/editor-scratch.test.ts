import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, run } from '../helpers.js';

/** Editors' temporary files are scratch by default: never in the recycle area, never in a commit. */
describe('editor temp files are scratch by default', () => {
  let d: TestDaemon;
  const EDITOR_TEMP = /(^|\/)(4913|[^/]*\.sw[a-px]|[^/]*~|\.#[^/]*|#[^/]*#)$/;

  beforeAll(async () => {
    d = await TestDaemon.withBranch('edit');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  /** Every path any commit of the branch ever held, and every path in the recycle area. */
  const traces = async (branch: string) => {
    await d.sync(`demo/${branch}`);
    const log = (await d.git('log', '--name-only', '--format=', branch)).stdout.split('\n').filter(Boolean);
    const trash = (await d.nasJson<{ path: string }[]>('trash', 'list', 'demo')).map((t) => t.path);
    return { committed: log.filter((f) => EDITOR_TEMP.test(f)), recycled: trash.filter((f) => EDITOR_TEMP.test(f)), log, trash };
  };

  /**
   * Real vim saving a file with its defaults: a swap file (and the `.swx` probe before it), the `4913` probe beside the
   * file, and with writebackup the file renamed to `file~` while the new one is written (`keep`: backup on, the `~`
   * stays). backupskip is emptied: its default skips /tmp/*, where the test's mount lives.
   */
  const vim = async (file: string, line: string, keep = false) => {
    const options = `set swapfile writebackup ${keep ? 'backup' : 'nobackup'} backupcopy=auto backupskip= directory=. backupdir=.`;
    const r = await run('vim', ['-u', 'NONE', '-i', 'NONE', '-N', '-es', '-c', options, '-c', `normal Go${line}`, '-c', 'wq', file], { env: { ...process.env, HOME: d.dir } });
    expect(r.code, r.stderr).toBe(0);
  };

  /** emacs is not installed: its lock link (.#x -> user@host.pid) and auto-save file (#x#), made and removed by the same syscalls. */
  const emacs = async (dir: string, name: string, text: string) => {
    await fs.symlink(`root@host.${process.pid}:1`, `${dir}/.#${name}`);
    await fs.writeFile(`${dir}/#${name}#`, 'autosave\n');
    await fs.writeFile(`${dir}/${name}`, text);
    await fs.unlink(`${dir}/#${name}#`);
    await fs.unlink(`${dir}/.#${name}`);
  };

  it('vim and emacs saves in a versioned folder leave nothing in the recycle area or in commits', async () => {
    const p = (rel: string) => d.path('demo@edit', rel);
    await fs.writeFile(p('outbox/plan.md'), 'one\n');
    await d.sync('demo/edit');
    await vim(p('outbox/plan.md'), 'two');
    await vim(p('outbox/plan.md'), 'three', true);
    await vim(p('outbox/new.md'), 'fresh');
    await emacs(p('outbox'), 'notes.md', 'from emacs\n');
    expect(await fs.readFile(p('outbox/plan.md'), 'utf8')).toBe('one\ntwo\nthree\n');
    expect(await fs.readFile(p('outbox/plan.md~'), 'utf8')).toBe('one\ntwo\n');
    const t = await traces('edit');
    expect(t.log).toEqual(expect.arrayContaining(['outbox/plan.md', 'outbox/new.md', 'outbox/notes.md']));
    expect(t.committed).toEqual([]);
    expect(t.recycled).toEqual([]);
    // Nothing at all: the save's rename of plan.md to plan.md~ is no deletion of plan.md either.
    expect(t.trash).toEqual([]);
  });

  it('a git clone that stops at .git in a versioned folder leaves no directory in the recycle area', async () => {
    const r = await run('git', ['clone', '-q', `${d.state}/homes/demo.git`, d.path('demo@edit', 'outbox/cloned')]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/\.git/);
    const t = await traces('edit');
    expect(t.trash.filter((p) => p.startsWith('outbox/cloned'))).toEqual([]);
    expect(t.log.filter((p) => p.startsWith('outbox/cloned'))).toEqual([]);
  });

  it('applies to a Home whose .gitignore names no editor files (made before the template did)', async () => {
    // The old template's .gitignore, less its editor lines: only the built-in list is left to name them.
    await d.pushToMain({ '.gitignore': 'node_modules/\n__pycache__/\n' }, 'a .gitignore from before');
    const b = await d.nas('branch', 'create', 'demo/old');
    expect(b.code, b.stderr).toBe(0);
    const p = (rel: string) => d.path('demo@old', rel);
    await fs.writeFile(p('outbox/old.md'), 'one\n');
    await d.sync('demo/old');
    await vim(p('outbox/old.md'), 'two');
    await vim(p('outbox/old.md'), 'three', true);
    await emacs(p('outbox'), 'old-notes.md', 'from emacs\n');
    const t = await traces('old');
    expect(t.log).toEqual(expect.arrayContaining(['outbox/old.md', 'outbox/old-notes.md']));
    expect(t.committed).toEqual([]);
    expect(t.recycled).toEqual([]);
  });

  it('never makes a protected or tracked path scratch, and a Home rule may re-include', async () => {
    const p = (rel: string) => d.path('demo@old', rel);
    // The journal is append-only: a file named like a backup there is versioned all the same.
    await fs.writeFile(p('memory/journal/day.md~'), 'kept\n');
    await fs.writeFile(p('outbox/.gitignore'), '!keep~\n');
    await fs.writeFile(p('outbox/keep~'), 'wanted\n');
    await fs.writeFile(p('outbox/drop~'), 'not wanted\n');
    await d.sync('demo/old');
    const tree = (await d.git('ls-tree', '-r', '--name-only', 'old')).stdout.split('\n');
    expect(tree).toEqual(expect.arrayContaining(['memory/journal/day.md~', 'outbox/keep~']));
    expect(tree).not.toContain('outbox/drop~');
  });
});
