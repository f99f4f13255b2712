import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, run } from '../helpers.js';

/** nas home adopt: an existing git repository becomes a Home with its history and the template's .nas/; its start set waits as a PR. */
describe('home adopt', () => {
  let d: TestDaemon;
  let repo: string;
  const git = (...args: string[]) => run('git', ['-c', 'user.name=dev', '-c', 'user.email=dev@x', ...args], { cwd: repo });
  const store = (...args: string[]) => run('git', [`--git-dir=${d.state}/homes/proj.git`, ...args]);

  beforeAll(async () => {
    d = await TestDaemon.start();
    // A plain repository with history: three commits on its default branch (not named main), and a side branch.
    repo = `${d.dir}/project`;
    await fs.mkdir(repo);
    expect((await git('init', '-q', '-b', 'trunk')).code).toBe(0);
    for (const [i, [file, text]] of [['README.md', 'a project\n'], ['src/app.txt', 'version 1\n'], ['src/app.txt', 'version 2\n']].entries()) {
      await fs.mkdir(`${repo}/src`, { recursive: true });
      await fs.writeFile(`${repo}/${file}`, text);
      expect((await git('add', '-A')).code).toBe(0);
      expect((await git('commit', '-qm', `step ${i + 1}`)).code).toBe(0);
    }
    expect((await git('branch', 'side')).code).toBe(0);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('refuses a URL of another kind (a remote helper would run as root), and a caller that is not the owner', async () => {
    for (const url of ['ext::sh -c touch% /tmp/pwned', 'fd::3', 'http://git.example/x.git', 'relative::/tmp/x']) {
      const r = await d.nas('home', 'adopt', 'bad', url);
      expect(r.code, url).toBe(1);
      expect(r.stderr).toMatch(/give an https:\/\/, ssh:\/\/, git:\/\/ or file:\/\/ URL, or an absolute path/);
    }
    const notOwner = await d.nasWith({ owner: false }, 'home', 'adopt', 'bad', repo);
    expect(notOwner.code).toBe(1);
    expect(notOwner.stderr).toMatch(/owner action/);
    const missing = await d.nas('home', 'adopt', 'bad', `${d.dir}/no-such-repo`);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot take the history of .*nothing was adopted/);
    expect(await fs.readdir(`${d.state}/homes`)).not.toContain('bad.git');
    expect((await d.nasJson('home', 'list')).map((h: { role: string }) => h.role)).not.toContain('bad');
  });

  it('takes the default branch\'s whole history as main with the template\'s .nas/ on top, shows its files in the mount, and proposes the start set as a PR', async () => {
    const r = await d.nasJson('home', 'adopt', 'proj', repo, '--owner', 'alice');
    expect(r, JSON.stringify(await d.nasJson('pr', 'show', 'proj', String(r.pr)))).toMatchObject({ role: 'proj', source: repo, branch: 'trunk', prState: 'waiting' });
    // The start set it lacks (every PR's memory check needs AGENTS.md and memory/MEMORY.md), nothing else: it has no .nas/ of its own.
    expect([...r.proposed].sort()).toEqual(['AGENTS.md', 'memory/MEMORY.md']);
    // main is the repository's history, commit for commit, and nasd's one commit on top.
    const theirs = (await git('rev-list', 'trunk')).stdout;
    expect((await store('rev-list', 'main^')).stdout).toBe(theirs);
    expect((await store('log', '--format=%s', 'main')).stdout).toMatch(/^nas: adopt: .*\nstep 3\nstep 2\nstep 1\n$/);
    expect((await store('rev-parse', '--verify', '-q', 'refs/heads/side')).code).not.toBe(0);
    expect(await fs.readFile(d.path('proj', 'README.md'), 'utf8')).toBe('a project\n');
    expect(await fs.readFile(d.path('proj', 'src/app.txt'), 'utf8')).toBe('version 2\n');
    // main has the built-in template's .nas/ from the start; the PR waits for the owner.
    expect((await d.nasJson('home', 'list')).find((h: { role: string }) => h.role === 'proj').problems).toEqual([]);
    expect(await fs.readFile(d.path('proj', '.nas/role.yaml'), 'utf8')).toMatch(/^owner: alice$/m);
    await expect(fs.stat(d.path('proj', 'AGENTS.md'))).rejects.toThrow(/ENOENT/);
    const pr = await d.nasJson('pr', 'show', 'proj', String(r.pr));
    expect(pr.state).toBe('waiting');
    expect(pr.files.map((f: { path: string }) => f.path).sort()).toEqual([...r.proposed].sort());
    // The PR is one commit off main, adding the start set only.
    expect((await store('rev-parse', `${pr.head}^`)).stdout.trim()).toBe(r.main);
    // A branch works as in any Home while it waits.
    expect((await d.nas('branch', 'create', 'proj/work')).code).toBe(0);
    expect(await fs.readFile(d.path('proj@work', 'src/app.txt'), 'utf8')).toBe('version 2\n');

    const approved = await d.nasJson('pr', 'approve', 'proj', String(r.pr));
    expect(approved.state).toBe('merged');
    expect((await store('rev-list', 'main')).stdout).toContain(theirs);
    const role = await fs.readFile(d.path('proj', '.nas/role.yaml'), 'utf8');
    expect(role).toMatch(/^role: proj$/m);
    expect(role).toMatch(/^owner: alice$/m);
    expect(await fs.readFile(d.path('proj', '.nas/policy.yaml'), 'utf8')).toMatch(/read_only:/);
    expect(await fs.readFile(d.path('proj', 'AGENTS.md'), 'utf8')).toMatch(/^# proj/);
    const listed = (await d.nasJson('home', 'list')).find((h: { role: string }) => h.role === 'proj');
    expect(listed.problems).toEqual([]);
  });

  it('takes a file:// URL as it takes a path', async () => {
    const r = await d.nasJson('home', 'adopt', 'proj2', `file://${repo}`);
    expect(r).toMatchObject({ role: 'proj2', branch: 'trunk', prState: 'waiting' });
    expect((await run('git', [`--git-dir=${d.state}/homes/proj2.git`, 'rev-parse', 'main^'])).stdout).toBe((await git('rev-parse', 'trunk')).stdout);
    expect(await fs.readFile(d.path('proj2', 'src/app.txt'), 'utf8')).toBe('version 2\n');
  });

  it('refuses a role that is taken, leaving the Home as it was', async () => {
    const before = (await store('rev-parse', 'main')).stdout;
    const again = await d.nas('home', 'adopt', 'proj', repo);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/a Home named "proj" exists already/);
    expect((await store('rev-parse', 'main')).stdout).toBe(before);
  });
});
