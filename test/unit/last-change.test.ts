import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Store } from '../../src/store/store.js';
import { run } from '../helpers.js';

/**
 * The last-change time every path shows (files and folders, without a metadata record) is what
 * `git log -1 --first-parent -- <path>` says, on a made-up history with merges, deletions, renames and a path
 * deleted and added again: for main's head (the table built in one pass), main's next head after a merge (the
 * table advanced), a branch on main, an older commit and a branch forked from it, and after a restart (the table
 * kept on disk).
 */
describe('last change of every path', () => {
  let dir: string;
  let bare: string;
  let work: string;
  let clock = 1_700_000_000;

  const git = async (...args: string[]) => {
    clock += 60;
    const date = `${clock} +0000`;
    const env = { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@x' };
    const r = await run('git', args, { cwd: work, env });
    if (r.code !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const bareGit = async (...args: string[]) => (await run('git', [`--git-dir=${bare}`, ...args])).stdout;
  const write = async (rel: string, text: string) => {
    await fs.mkdir(path.dirname(`${work}/${rel}`), { recursive: true });
    await fs.writeFile(`${work}/${rel}`, text);
  };
  const commit = async (message: string) => (await git('add', '-A'), await git('commit', '-qm', message));
  const push = () => git('push', '-q', '-f', 'origin', 'HEAD:main');

  /** What git says, for every path of `rev`. */
  async function expected(rev: string): Promise<Map<string, number>> {
    const paths = (await bareGit('ls-tree', '-r', '-t', '-z', '--name-only', rev)).split('\0').slice(0, -1);
    const out = new Map<string, number>();
    for (const p of paths) out.set(p, Number((await bareGit('log', '-1', '--first-parent', '--format=%ct', rev, '--', p)).trim()));
    return out;
  }
  async function shown(store: Store, rev: string): Promise<Map<string, number>> {
    const oid = (await bareGit('rev-parse', rev)).trim();
    const out = new Map<string, number>();
    for (const p of (await expected(rev)).keys()) out.set(p, (await store.lastChange.timeOf(oid, p))!);
    return out;
  }

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-last-change-'));
    bare = `${dir}/home.git`;
    work = `${dir}/work`;
    await run('git', ['init', '-q', '--bare', '-b', 'main', bare]);
    await run('git', ['init', '-q', '-b', 'main', work]);
    await git('remote', 'add', 'origin', bare);
    await write('a/one.md', '1');
    await write('a/deep/two.md', '2');
    await write('b/three.md', '3');
    await write('gone.md', 'g');
    await write('top.md', 't');
    await commit('first');
    await git('checkout', '-qb', 'side');
    await write('b/side.md', 's');
    await commit('side one');
    await write('a/deep/two.md', '2 on side');
    await commit('side two');
    await git('checkout', '-q', 'main');
    await write('top.md', 't2');
    await commit('top');
    await git('merge', '-q', '--no-ff', 'side', '-m', 'merge side');
    await git('rm', '-q', 'gone.md');
    await commit('delete gone.md');
    await fs.mkdir(`${work}/c`);
    await git('mv', 'b/three.md', 'c/three.md');
    await commit('rename three');
    await commit('nothing').catch(() => undefined);
    await write('gone.md', 'back');
    await commit('gone.md again');
    await git('rm', '-q', '-r', 'a/deep');
    await write('a/deep', 'a file now');
    await commit('folder to file');
    await git('commit', '-q', '--allow-empty', '-m', 'unrelated');
    await push();
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("shows git's first-parent answer for every path of main, a branch, main after a merge and an older commit", async () => {
    const store = await Store.open(bare);
    expect(await shown(store, 'main')).toEqual(await expected('main'));
    // A branch on main: its commits on top of main's table.
    await git('checkout', '-qb', 'agent');
    await write('a/one.md', '1 from agent');
    await write('new/folder/file.md', 'n');
    await commit('agent work');
    await git('rm', '-q', 'top.md');
    await write('a/one.md', '1 from agent, again');
    await commit('agent deletes, and changes a file again');
    await git('push', '-q', 'origin', 'agent');
    expect(await shown(store, 'agent')).toEqual(await expected('agent'));
    // Main moves by a merge of that branch (and a commit after it): the table is advanced.
    await git('checkout', '-q', 'main');
    await write('c/other.md', 'o');
    await commit('main moves on');
    await git('merge', '-q', '--no-ff', 'agent', '-m', 'merge agent');
    await write('gone.md', 'changed again');
    await commit('after merge');
    await push();
    expect(await shown(store, 'main')).toEqual(await expected('main'));
    // An older commit, and a branch forked from an older head of main: tables of their own, same answers.
    expect(await shown(store, 'main~5')).toEqual(await expected('main~5'));
    await git('checkout', '-q', '-b', 'late', 'main~4');
    await write('b/side.md', 's from late');
    await commit('late work');
    await git('push', '-q', 'origin', 'late');
    await git('checkout', '-q', 'main');
    expect(await shown(store, 'late')).toEqual(await expected('late'));
    const head = (await bareGit('rev-parse', 'main')).trim();
    expect(await store.lastChange.timeOf(head, 'no/such/path')).toBeNull();
    // Deleted on the branch, merged: gone from main's table too.
    expect(await store.lastChange.timeOf(head, 'top.md')).toBeNull();
  });

  it('keeps main\'s table in the Store, and a restart answers from it', async () => {
    const head = (await bareGit('rev-parse', 'main')).trim();
    // The table is saved beside the listing, not before it: give it its moment.
    for (let i = 0; i < 100 && !(await fs.stat(`${bare}/nas-last-change`).catch(() => null)); i++) await new Promise((r) => setTimeout(r, 20));
    const again = await Store.open(bare);
    expect(await shown(again, 'main')).toEqual(await expected('main'));
    // What is on disk is main's head, whatever the process that wrote it.
    const { gunzipSync } = await import('node:zlib');
    const { gzipSync } = await import('node:zlib');
    const saved = gunzipSync(await fs.readFile(`${bare}/nas-last-change`)).toString();
    expect(saved.split('\n')[0]).toContain(head);
    // Nothing is worked out again after a restart: a time planted in the kept table is what shows.
    await fs.writeFile(`${bare}/nas-last-change`, gzipSync(saved.replace(/\d+ c\/three\.md\0/, '1234 c/three.md\0')));
    expect(await (await Store.open(bare)).lastChange.timeOf(head, 'c/three.md')).toBe(1234);
  });
});
