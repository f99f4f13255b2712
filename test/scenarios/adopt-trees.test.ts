import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, run } from '../helpers.js';

/**
 * What an adopted repository may not bring (security issue 30, items 6 and 7): a `.git` in any spelling git
 * takes for one, a submodule, a root `.nas-meta`, in any commit of its history; and its own `.nas/` files take
 * effect only through the adopt PR. What a Home's history holds anyway (here an imported bundle) is never served
 * as `.git`, and a submodule lists as an empty read-only folder.
 */
describe('adopted trees', () => {
  let d: TestDaemon;
  let n = 0;
  /** What a `.git` that git took for a repository would make (its core.fsmonitor runs as whoever runs git). */
  let pwned = '';

  /** A repository of trees git never checks out, built with git mktree and commit-tree. */
  class Repo {
    readonly dir = `${d.dir}/repo-${++n}`;
    private head: string | null = null;

    async init(branch = 'trunk'): Promise<this> {
      await fs.mkdir(this.dir);
      await this.git(['init', '-q', '-b', branch]);
      this.branch = branch;
      return this;
    }

    private branch = 'trunk';

    async git(args: string[], input?: string): Promise<string> {
      const r = await run('git', ['-c', 'user.name=dev', '-c', 'user.email=dev@x', ...args], { cwd: this.dir, input });
      if (r.code !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
      return r.stdout.trim();
    }

    blob(content: string): Promise<string> {
      return this.git(['hash-object', '-w', '--stdin'], content);
    }

    /** A tree of `ls-tree` lines (`<mode> <type> <id>\t<name>`). */
    tree(lines: string[]): Promise<string> {
      return this.git(['mktree', '--missing'], lines.map((l) => `${l}\n`).join(''));
    }

    /** A folder git would take for a repository's `.git`, its config running a command as whoever runs git there. */
    async dotGit(): Promise<string> {
      const config = await this.blob(`[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch ${pwned}\n`);
      const head = await this.blob('ref: refs/heads/main\n');
      const keep = await this.tree([`100644 blob ${await this.blob('')}\tkeep`]);
      return this.tree([`100644 blob ${config}\tconfig`, `100644 blob ${head}\tHEAD`, `040000 tree ${keep}\tobjects`, `040000 tree ${keep}\trefs`]);
    }

    /** Commit a tree onto the branch (after the last commit); its id. */
    async commit(tree: string, message: string): Promise<string> {
      const commit = await this.git(['commit-tree', tree, ...(this.head ? ['-p', this.head] : []), '-m', message]);
      await this.git(['update-ref', `refs/heads/${this.branch}`, commit]);
      this.head = commit;
      return commit;
    }
  }

  const readme = async (r: Repo) => `100644 blob ${await r.blob('a project\n')}\tREADME.md`;

  /** The adopt is refused, says what and where and what to do, and leaves no Home and nothing in the state directory. */
  async function expectRefused(role: string, source: string, says: RegExp): Promise<void> {
    const r = await d.nas('home', 'adopt', role, source);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stderr).toMatch(says);
    expect(r.stderr).toMatch(/nothing was adopted\. Rewrite the history without it( \(e\.g\. git filter-repo --invert-paths --path '.+'\))? and adopt again/);
    expect((await d.nasJson('home', 'list')).map((h: { role: string }) => h.role)).not.toContain(role);
    expect((await fs.readdir(`${d.state}/homes`)).filter((f) => f === `${role}.git` || f.startsWith('.import-'))).toEqual([]);
    await expect(fs.stat(d.path(role))).rejects.toThrow(/ENOENT/);
  }

  const escaped = (s: string) => s.replace(/[.~()]/g, '\\$&');

  beforeAll(async () => {
    d = await TestDaemon.start();
    pwned = `${d.dir}/pwned`;
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('refuses a repository whose tip holds .git in any spelling git takes for one, naming the commit and path', async () => {
    for (const name of ['.git', '.GIT', '.git.', 'git~1']) {
      const repo = await new Repo().init();
      await repo.commit(await repo.tree([await readme(repo)]), 'first');
      const sub = await repo.tree([`100644 blob ${await repo.blob('x\n')}\tfile.txt`, `040000 tree ${await repo.dotGit()}\t${name}`]);
      const tip = await repo.commit(await repo.tree([await readme(repo), `040000 tree ${sub}\tsub`]), `holds sub/${name}`);
      await expectRefused(`dotgit${n}`, repo.dir, new RegExp(`history holds sub/${escaped(name)} \\(in commit ${tip.slice(0, 12)}\\), which is a name git takes for its own \\.git directory`));
    }
  });

  it('refuses a .git that only an older commit holds: history views serve every commit', async () => {
    const repo = await new Repo().init();
    await repo.commit(await repo.tree([await readme(repo)]), 'first');
    const old = await repo.commit(await repo.tree([await readme(repo), `040000 tree ${await repo.dotGit()}\t.GIT`]), 'holds .GIT');
    await repo.commit(await repo.tree([await readme(repo), `100644 blob ${await repo.blob('later\n')}\tnotes.md`]), 'drops it');
    // The tip is clean: git itself checks out nothing of it.
    expect(await repo.git(['ls-tree', '--name-only', 'trunk'])).toBe('README.md\nnotes.md');
    await expectRefused('oldgit', `file://${repo.dir}`, new RegExp(`history holds \\.GIT \\(in commit ${old.slice(0, 12)}\\), which is a name git takes for its own \\.git directory`));
  });

  it('refuses a submodule (gitlink), a root .nas-meta, and an object git\'s fsck refuses', async () => {
    const withLink = await new Repo().init();
    const vendor = await withLink.tree([`160000 commit ${'1'.repeat(40)}\tlib`]);
    const tip = await withLink.commit(await withLink.tree([await readme(withLink), `040000 tree ${vendor}\tvendor`]), 'a submodule');
    await expectRefused('linked', withLink.dir, new RegExp(`history holds vendor/lib \\(in commit ${tip.slice(0, 12)}\\), which is a submodule`));

    const withMeta = await new Repo().init();
    const records = await withMeta.tree([`100644 blob ${await withMeta.blob('mode=104755 uid=0 gid=0 atime=0 mtime=0\n')}\tREADME.md`]);
    const metaTip = await withMeta.commit(await withMeta.tree([await readme(withMeta), `040000 tree ${records}\t.nas-meta`]), 'fake records');
    await expectRefused('recorded', withMeta.dir, new RegExp(`history holds \\.nas-meta \\(in commit ${metaTip.slice(0, 12)}\\), which is where a Home keeps its files' metadata records`));

    // A commit git's fsck refuses (a time zone of +99999), fetched strictly: its words, and nothing adopted.
    const malformed = await new Repo().init();
    const tree = await malformed.tree([await readme(malformed)]);
    const bad = await malformed.git(['hash-object', '-t', 'commit', '-w', '--literally', '--stdin'],
      `tree ${tree}\nauthor dev <dev@x> 1700000000 +99999\ncommitter dev <dev@x> 1700000000 +0000\n\nbad zone\n`);
    await malformed.git(['update-ref', 'refs/heads/trunk', bad]);
    await expectRefused('malformed', malformed.dir, new RegExp(`history holds an object git's fsck refuses \\(object ${bad}: badTimezone: `));
  });

  it('never serves a .git that a Home\'s history holds, and lists a submodule as an empty read-only folder', async () => {
    // A bundle (nas import takes one as it is) whose main holds .GIT at the root, sub/.git, and a gitlink.
    const repo = await new Repo().init('main');
    const dotGit = await repo.dotGit();
    const sub = await repo.tree([`100644 blob ${await repo.blob('x\n')}\tfile.txt`, `040000 tree ${dotGit}\t.git`]);
    const tip = await repo.commit(await repo.tree([
      await readme(repo), `040000 tree ${dotGit}\t.GIT`, `040000 tree ${sub}\tsub`, `160000 commit ${'2'.repeat(40)}\tvendor`,
    ]), 'crafted');
    await repo.git(['bundle', 'create', '-q', `${d.dir}/crafted.bundle`, 'main']);
    expect((await d.nas('import', `${d.dir}/crafted.bundle`, '--as', 'crafted')).code).toBe(0);
    expect((await d.nas('branch', 'create', 'crafted/look')).code).toBe(0);

    for (const view of ['crafted', `crafted:${tip.slice(0, 12)}`, 'crafted@look']) {
      // ls -la stats every entry: a gitlink shown as a file git cannot read failed the whole listing with EIO.
      const ls = await run('ls', ['-la', d.path(view)]);
      expect(ls.code, `${view}: ${ls.stderr}`).toBe(0);
      expect((await fs.readdir(d.path(view))).sort(), view).toEqual(expect.arrayContaining(['README.md', 'sub', 'vendor']));
      expect(await fs.readdir(d.path(view)), view).not.toContain('.GIT');
      expect(await fs.readdir(d.path(view, 'sub')), view).toEqual(['file.txt']);
      for (const hidden of ['.GIT', '.GIT/config', '.git', 'sub/.git', 'sub/.git/config', 'sub/.GIT']) {
        await expect(fs.lstat(d.path(view, hidden)), `${view}/${hidden}`).rejects.toThrow(/ENOENT/);
      }
      const vendor = await fs.stat(d.path(view, 'vendor'));
      expect(vendor.isDirectory(), view).toBe(true);
      expect(vendor.mode & 0o222, view).toBe(0);
      expect(await fs.readdir(d.path(view, 'vendor')), view).toEqual([]);
    }
    // Root's git in the Home finds no repository there, and runs nothing its config names.
    for (const dir of [d.path('crafted'), d.path('crafted', 'sub'), d.path('crafted@look', 'sub')]) {
      const status = await run('git', ['-C', dir, 'status']);
      expect(status.stderr, dir).toMatch(/not a git repository/);
    }
    await expect(fs.stat(pwned)).rejects.toThrow(/ENOENT/);
  });

  it('holds the repository\'s own .nas/ files and what its checks run for review: main runs with the template\'s', async () => {
    const repo = await new Repo().init();
    const first = await repo.commit(await repo.tree([await readme(repo)]), 'first');
    const policy = 'version: 1\nread_only:\n  - ".nas/**"\n  - "docs/**"\nappend_only:\n  - "memory/journal/**"\n';
    const checks = 'checks:\n  - name: lint\n    run: scripts/lint.sh\n    timeout: 10s\n';
    const nas = await repo.tree([`100644 blob ${await repo.blob(policy)}\tpolicy.yaml`, `100644 blob ${await repo.blob(checks)}\tchecks.yaml`]);
    const scripts = await repo.tree([`100755 blob ${await repo.blob('#!/bin/sh\nexit 0\n')}\tlint.sh`]);
    const docs = await repo.tree([`100644 blob ${await repo.blob('# Guide\n')}\tguide.md`]);
    const second = await repo.commit(await repo.tree([
      await readme(repo), `040000 tree ${nas}\t.nas`, `040000 tree ${scripts}\tscripts`, `040000 tree ${docs}\tdocs`,
    ]), 'configure');
    const store = (...args: string[]) => run('git', [`--git-dir=${d.state}/homes/conf.git`, ...args]);

    const r = await d.nasJson('home', 'adopt', 'conf', repo.dir, '--owner', 'alice');
    expect(r).toMatchObject({ role: 'conf', branch: 'trunk', prState: 'waiting' });
    expect([...r.proposed].sort()).toEqual(['.gitignore', '.nas/checks.yaml', '.nas/policy.yaml', 'AGENTS.md', 'CLAUDE.md', 'inbox/README.md',
      'memory/MEMORY.md', 'memory/journal/README.md', 'memory/notes/README.md', 'memory/quarantine/README.md', 'outbox/README.md', 'scripts/lint.sh',
      'skills/README.md']);
    // Every commit of the repository is main's; nasd's one commit on top sets .nas/ to the template's.
    expect((await store('rev-list', `${r.main}^`)).stdout).toBe(`${second}\n${first}\n`);
    expect((await store('log', '--format=%s', 'main')).stdout).toMatch(/^nas: adopt: main runs with the built-in template's \.nas\/.*\nconfigure\nfirst\n$/);

    // main's policy is the one a new Home gets, not the repository's; its checks and their script are not there.
    expect((await d.nas('home', 'create', 'fresh', '--owner', 'alice')).code).toBe(0);
    expect(await fs.readFile(d.path('conf', '.nas/policy.yaml'), 'utf8')).toBe(await fs.readFile(d.path('fresh', '.nas/policy.yaml'), 'utf8'));
    await expect(fs.stat(d.path('conf', '.nas/checks.yaml'))).rejects.toThrow(/ENOENT/);
    await expect(fs.stat(d.path('conf', 'scripts/lint.sh'))).rejects.toThrow(/ENOENT/);
    expect(await fs.readFile(d.path('conf', '.nas/role.yaml'), 'utf8')).toMatch(/^owner: alice$/m);
    expect(await fs.readFile(d.path('conf', 'docs/guide.md'), 'utf8')).toBe('# Guide\n');
    expect((await d.nasJson('home', 'list')).find((h: { role: string }) => h.role === 'conf').problems).toEqual([]);
    // Not in force: the repository's read_only docs/** does not hold in a branch.
    expect((await d.nas('branch', 'create', 'conf/before')).code).toBe(0);
    await fs.writeFile(d.path('conf@before', 'docs/new.md'), 'written\n');

    // The PR brings them back on top of main, and waits for the owner.
    const pr = await d.nasJson('pr', 'show', 'conf', String(r.pr));
    expect(pr.state).toBe('waiting');
    expect(pr.files.map((f: { path: string }) => f.path).sort()).toEqual([...r.proposed].sort());
    expect((await store('rev-parse', `${pr.head}^`)).stdout.trim()).toBe(r.main);
    expect((await store('show', `${pr.head}:.nas/policy.yaml`)).stdout).toBe(policy);

    expect((await d.nasJson('pr', 'approve', 'conf', String(r.pr))).state).toBe('merged');
    expect(await fs.readFile(d.path('conf', '.nas/policy.yaml'), 'utf8')).toBe(policy);
    expect(await fs.readFile(d.path('conf', '.nas/checks.yaml'), 'utf8')).toBe(checks);
    expect((await fs.stat(d.path('conf', 'scripts/lint.sh'))).mode & 0o111).not.toBe(0);
    expect(await fs.readFile(d.path('conf', '.nas/role.yaml'), 'utf8')).toMatch(/^role: conf$/m);
    // In force once approved.
    expect((await d.nas('branch', 'create', 'conf/after')).code).toBe(0);
    await expect(fs.writeFile(d.path('conf@after', 'docs/other.md'), 'no\n')).rejects.toThrow(/EPERM/);
  });
});
