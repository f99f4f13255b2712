import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { TestDaemon, run } from '../helpers.js';

/** nas home adopt: an existing git repository becomes a Home with its history and the template's .nas/; its start set waits as a PR. */
/** What a repository with none of it gets proposed: the Home's whole layout (as nas home create starts it). */
const LAYOUT = ['.gitignore', 'AGENTS.md', 'CLAUDE.md', 'inbox/README.md', 'memory/MEMORY.md', 'memory/journal/README.md',
  'memory/notes/README.md', 'memory/quarantine/README.md', 'outbox/README.md', 'skills/README.md'];

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

  it('takes the default branch\'s whole history as main with the template\'s .nas/ on top, shows its files in the mount, and proposes the Home\'s whole layout as a PR', async () => {
    const r = await d.nasJson('home', 'adopt', 'proj', repo, '--owner', 'alice');
    expect(r, JSON.stringify(await d.nasJson('pr', 'show', 'proj', String(r.pr)))).toMatchObject({ role: 'proj', source: repo, branch: 'trunk', prState: 'waiting' });
    // The Home's whole layout, which it lacks; nothing of .nas/: it has none of its own.
    expect([...r.proposed].sort()).toEqual(LAYOUT);
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
    // AGENTS.md introduces the repository by its name and its README's first paragraph.
    const agents = await fs.readFile(d.path('proj', 'AGENTS.md'), 'utf8');
    expect(agents).toMatch(/^# proj\n\nThis Home is the repository project, adopted with its history \(nas home adopt\)\. From its README:\n\n> a project\n/);
    expect(agents).toMatch(/Read memory\/MEMORY\.md at the start of every session/);
    expect(await fs.readlink(d.path('proj', 'CLAUDE.md'))).toBe('AGENTS.md');
    for (const dir of ['inbox', 'outbox', 'skills', 'memory/notes', 'memory/journal', 'memory/quarantine']) {
      expect((await fs.stat(d.path('proj', dir))).isDirectory(), dir).toBe(true);
    }
    expect(await fs.readFile(d.path('proj', '.gitignore'), 'utf8')).toMatch(/^\*\.swp$/m);
    const listed = (await d.nasJson('home', 'list')).find((h: { role: string }) => h.role === 'proj');
    expect(listed.problems).toEqual([]);
  });

  it('takes a file:// URL as it takes a path', async () => {
    const r = await d.nasJson('home', 'adopt', 'proj2', `file://${repo}`);
    expect(r).toMatchObject({ role: 'proj2', branch: 'trunk', prState: 'waiting' });
    expect((await run('git', [`--git-dir=${d.state}/homes/proj2.git`, 'rev-parse', 'main^'])).stdout).toBe((await git('rev-parse', 'trunk')).stdout);
    expect(await fs.readFile(d.path('proj2', 'src/app.txt'), 'utf8')).toBe('version 2\n');
  });

  it('keeps what a repository has of the layout (its CLAUDE.md, skills/, a file named outbox), and its .gitignore gains only the editor rules it lacks', async () => {
    const widget = `${d.dir}/widget`;
    const files: Record<string, string> = {
      'README.md': '# Widget\n\n[![build](https://ci.example/w.svg)](https://ci.example/w)\n\nWidget turns gears\ninto widgets.\n\nMore below.\n',
      'CLAUDE.md': 'Run make test before you finish.\n',
      'skills/deploy/SKILL.md': '---\nname: deploy\ndescription: Ship the widget\n---\n# deploy\n',
      '.gitignore': 'node_modules/\n*.swp\n',
      outbox: 'a file, not a folder\n',
    };
    for (const [file, text] of Object.entries(files)) {
      await fs.mkdir(path.dirname(`${widget}/${file}`), { recursive: true });
      await fs.writeFile(`${widget}/${file}`, text);
    }
    const wgit = (...args: string[]) => run('git', ['-c', 'user.name=dev', '-c', 'user.email=dev@x', ...args], { cwd: widget });
    expect((await wgit('init', '-q', '-b', 'main')).code).toBe(0);
    expect((await wgit('add', '-A')).code).toBe(0);
    expect((await wgit('commit', '-qm', 'widget')).code).toBe(0);

    const r = await d.nasJson('home', 'adopt', 'widget', widget);
    expect([...r.proposed].sort()).toEqual(['.gitignore', 'AGENTS.md', 'inbox/README.md', 'memory/MEMORY.md', 'memory/journal/README.md',
      'memory/notes/README.md', 'memory/quarantine/README.md']);
    expect((await d.nasJson('pr', 'approve', 'widget', String(r.pr))).state).toBe('merged');
    const at = (p: string) => d.path('widget', p);
    expect(await fs.readFile(at('AGENTS.md'), 'utf8')).toMatch(/^# widget\n\nThis Home is the repository widget, .*From its README:\n\n> Widget turns gears into widgets\.\n\nInstructions/);
    expect(await fs.readFile(at('AGENTS.md'), 'utf8')).not.toMatch(/More below|ci\.example/);
    for (const [file, text] of Object.entries(files).filter(([f]) => f !== '.gitignore')) expect(await fs.readFile(at(file), 'utf8'), file).toBe(text);
    expect((await fs.lstat(at('CLAUDE.md'))).isSymbolicLink()).toBe(false);
    expect(await fs.readdir(at('skills'))).toEqual(['deploy']);
    const ignore = await fs.readFile(at('.gitignore'), 'utf8');
    expect(ignore.startsWith('node_modules/\n*.swp\n\n# editor swap')).toBe(true);
    expect(ignore.match(/^\*\.swp$/gm)).toHaveLength(1);
    for (const rule of ['*.swo', '4913', '.#*', '.DS_Store']) expect(ignore.split('\n'), rule).toContain(rule);
    expect(ignore).not.toMatch(/__pycache__/);
    for (const dir of ['inbox', 'memory/notes', 'memory/journal', 'memory/quarantine']) expect((await fs.stat(at(dir))).isDirectory(), dir).toBe(true);
    const listed = (await d.nasJson('home', 'list')).find((h: { role: string }) => h.role === 'widget');
    expect(listed.problems).toEqual([]);
  });

  it('refuses a role that is taken, leaving the Home as it was', async () => {
    const before = (await store('rev-parse', 'main')).stdout;
    const again = await d.nas('home', 'adopt', 'proj', repo);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/a Home named "proj" exists already/);
    expect((await store('rev-parse', 'main')).stdout).toBe(before);
  });
});
