import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { countTokens } from '../../src/memory/tokens.js';
import { TestDaemon, eventually } from '../helpers.js';

/** The memory commands end to end: notes written through the mount, checks and indexes through the CLI, git as the record. */

const note = (fields: Record<string, string>, body = 'Body.\n') =>
  `---\n${Object.entries(fields).map(([k, v]) => `${k}: ${v}`).join('\n')}\n---\n${body}`;

describe('nas memory, context and briefing', () => {
  let d: TestDaemon;
  const b = (rel: string) => d.path('demo@draft', rel);
  /** A note main has reviewed, listed in MEMORY.md: the review test makes it; on its own, a test has the owner review it. */
  const ensureReviewedOnMain = async () => {
    if ((await d.git('cat-file', '-e', 'main:memory/notes/builds.md')).code === 0) return;
    const text = note({ description: 'When the build breaks.', updated: '2026-11-25', trust: 'unreviewed' }, '# Builds\n\nRun make clean.\n');
    await d.pushToMain({ 'memory/quarantine/builds.md': text });
    expect((await d.nas('memory', 'review', 'demo', 'memory/quarantine/builds.md')).code).toBe(0);
  };
  const exists = (path: string) => fs.stat(path).then(() => true, () => false);
  /** Write a file an earlier test would have written, unless it is there: each test must also pass on its own (-t). */
  const ensure = async (rel: string, content: string) => {
    if (!(await exists(b(rel)))) {
      await fs.mkdir(b(rel.slice(0, rel.lastIndexOf('/'))), { recursive: true });
      await fs.writeFile(b(rel), content);
    }
  };

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    expect((await d.nas('branch', 'create', 'demo/draft')).code).toBe(0);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('passes on a fresh Home and reports the start set', async () => {
    const r = await d.nas('memory', 'check', 'demo');
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/memory check demo \(commit [0-9a-f]{12}\): ok, 0 error/);
    const json = await d.nasJson('memory', 'check', 'demo');
    expect(json.startSet.map((s: any) => s.path)).toEqual(['AGENTS.md', 'memory/MEMORY.md']);
    expect(json.startSet[0].bytes).toBe((await fs.stat(d.path('demo', 'AGENTS.md'))).size);
  });

  it("fails a branch whose run marks its own note reviewed, naming the note; passes once it says unreviewed", async () => {
    await fs.writeFile(b('memory/notes/git.md'), note({ description: 'When working with git branches.', updated: '2026-11-01', trust: 'reviewed' }));
    const r = await d.nas('memory', 'check', 'demo@draft');
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/memory\/notes\/git\.md:1: error \[trust-claim\]/);
    // Regenerating does not let the claim into the auto-loaded index.
    expect((await d.nas('memory', 'index', 'demo@draft')).code).toBe(0);
    expect(await fs.readFile(b('memory/MEMORY.md'), 'utf8')).not.toContain('git.md');

    const text = (await fs.readFile(b('memory/notes/git.md'), 'utf8')).replace('trust: reviewed', 'trust: unreviewed');
    await fs.writeFile(b('memory/notes/git.md'), text);
    const ok = await d.nas('memory', 'check', 'demo@draft');
    expect(ok.code, ok.stdout).toBe(0);
  });

  it('regenerates index blocks in a branch as a commit, keeping the text outside the markers', async () => {
    await fs.mkdir(b('memory/team'));
    const intro = '# Team memory\n\nHand-written intro.\n\n';
    const outro = '\nHand-written outro.\n';
    await fs.writeFile(b('memory/team/INDEX.md'), `${intro}<!-- nas:index:start -->\nstale line\n<!-- nas:index:end -->\n${outro}`);
    await fs.writeFile(b('memory/team/deploy.md'), note({ description: 'Before deploying to production.', updated: '2026-11-20' }));

    const stale = await d.nas('memory', 'index', 'demo@draft', '--check');
    expect(stale.code).toBe(1);
    expect(stale.stdout).toMatch(/memory\/team\/INDEX\.md:5: error \[index-stale\]/);

    const r = await d.nasJson('memory', 'index', 'demo@draft');
    expect(r.written).toEqual(['memory/team/INDEX.md']);
    const size = (await fs.stat(b('memory/team/deploy.md'))).size;
    const want = `${intro}<!-- nas:index:start -->\n- [deploy](deploy.md) [unreviewed]: Before deploying to production. (updated 2026-11-20, ${size} B)\n<!-- nas:index:end -->\n${outro}`;
    expect(await fs.readFile(b('memory/team/INDEX.md'), 'utf8')).toBe(want);
    expect((await d.gitBlob('draft:memory/team/INDEX.md')).toString()).toBe(want);
    expect((await d.git('log', '-1', '--format=%H', 'draft')).stdout.trim()).toBe(r.head);

    expect((await d.nas('memory', 'index', 'demo@draft', '--check')).code).toBe(0);
    const again = await d.nasJson('memory', 'index', 'demo@draft');
    expect(again.written).toEqual([]);
  });

  it('refuses to regenerate on main, and to rewrite a file whose markers are broken', async () => {
    const main = await d.nas('memory', 'index', 'demo');
    expect(main.code).toBe(1);
    expect(main.stderr).toMatch(/main is protected/);

    const broken = '# Broken\n<!-- nas:index:start -->\n<!-- nas:index:start -->\n<!-- nas:index:end -->\n';
    await fs.mkdir(b('memory/broken'));
    await fs.writeFile(b('memory/broken/INDEX.md'), broken);
    const r = await d.nas('memory', 'index', 'demo@draft');
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/memory\/broken\/INDEX\.md:3: error \[index-markers\] duplicate/);
    expect(await fs.readFile(b('memory/broken/INDEX.md'), 'utf8')).toBe(broken);
    await fs.rm(b('memory/broken'), { recursive: true });
  });

  it('reports malformed YAML, a binary note and a huge file with file and line, and keeps serving', async () => {
    await fs.writeFile(b('memory/notes/bad.md'), '---\ndescription: fine\nupdated: [2026\n---\nbody\n');
    await fs.writeFile(b('memory/notes/photo.md'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]));
    await fs.writeFile(b('memory/notes/huge.md'), Buffer.alloc(3 * 1024 * 1024, 'a'));
    const r = await d.nasJson('memory', 'check', 'demo@draft').catch(() => null);
    expect(r).toBeNull(); // exit 1: errors found
    const out = await d.nas('--json', 'memory', 'check', 'demo@draft');
    const report = JSON.parse(out.stdout);
    const at = (p: string) => report.findings.filter((f: any) => f.path === p).map((f: any) => `${f.rule}${f.line ? `:${f.line}` : ''}`);
    expect(at('memory/notes/bad.md')).toEqual(['front-matter:4']);
    expect(at('memory/notes/photo.md')).toEqual(['binary']);
    expect(at('memory/notes/huge.md')).toEqual(['too-large', 'topic-size']);
    // The rest was still checked, and the daemon still serves the mount and the CLI.
    expect(report.startSet.length).toBe(2);
    expect((await d.nas('status')).code).toBe(0);
    for (const f of ['bad.md', 'photo.md', 'huge.md']) await fs.unlink(b(`memory/notes/${f}`));
  });

  it('prints READ-ON-START then READ-ON-DEMAND paths that exist under the mount', async () => {
    await ensure('memory/notes/git.md', note({ description: 'When working with git branches.', updated: '2026-11-01', trust: 'unreviewed' }));
    await fs.writeFile(b('memory/quarantine/imported.md'), note({ description: 'Imported from another tool.' }));
    await fs.writeFile(b('inbox/task-1.md'), 'Please summarise the logs.\n');
    const r = await d.nas('context', 'demo@draft');
    expect(r.code).toBe(0);
    const [start, demand] = r.stdout.split('\n\n');
    expect(start.split('\n')).toEqual([expect.stringMatching(/^READ-ON-START/), b('AGENTS.md'), b('memory/MEMORY.md')]);
    const lines = demand.trim().split('\n').slice(1);
    expect(lines).toContain(`${b('memory/quarantine/imported.md')}  [unreviewed]`);
    expect(lines).toContain(`${b('inbox/task-1.md')}  [untrusted input]`);
    expect(lines).toContain(`${b('memory/notes/git.md')}  [unreviewed]`);
    for (const line of [...start.split('\n').slice(1), ...lines]) await fs.access(line.split('  [')[0]);
  });

  it('builds a briefing within --max-tokens, saying what it left out', async () => {
    await ensure('inbox/task-1.md', 'Please summarise the logs.\n');
    const agents = await fs.readFile(d.path('demo', 'AGENTS.md'), 'utf8');
    const whole = await d.nas('briefing', 'demo@draft');
    expect(whole.code).toBe(0);
    expect(whole.stdout).toContain(agents.trim());
    expect(whole.stdout).toContain('- inbox/task-1.md (27 B)');
    expect(whole.stdout).not.toContain('summarise the logs');

    // Room for AGENTS.md but not for MEMORY.md too: the less important file is left out whole, and listed.
    const small = await d.nas('briefing', 'demo@draft', '--max-tokens', '140');
    expect(small.code).toBe(0);
    expect(countTokens(small.stdout)).toBeLessThanOrEqual(140);
    expect(small.stdout).toContain(agents.trim());
    expect(small.stdout).toMatch(/left out to stay within 140 tokens/);
    expect(small.stdout).toMatch(/- memory\/MEMORY.md § "Memory" \(\d+ tokens\)/);
    expect(small.stdout).not.toContain('Reviewed core memory');

    const bad = await d.nas('briefing', 'demo', '--max-tokens', 'lots');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--max-tokens takes a whole number/);
  });

  it("starts a small briefing with AGENTS.md, cut at paragraphs rather than left out, and the hook prints paths", async () => {
    const rules = Array.from({ length: 40 }, (_, i) => `Rule ${i}: read the task twice and check the build before proposing change ${i}.`);
    await fs.writeFile(b('AGENTS.md'), `# Draft agent\n\n${rules.slice(0, 8).join('\n')}\n\n${rules.slice(8).join('\n')}\n`);
    const r = await d.nas('briefing', 'demo@draft', '--max-tokens', '300');
    expect(r.code, r.stderr).toBe(0);
    expect(countTokens(r.stdout)).toBeLessThanOrEqual(300);
    expect(r.stdout).toMatch(/^# Briefing: demo@draft\n\n=== AGENTS\.md ===\n# Draft agent\n\nRule 0: /);
    expect(r.stdout).not.toContain('Rule 39:');
    expect(r.stdout).toMatch(/- AGENTS\.md(: \d+ section\(s\), \d+ tokens \(the rest of)? § "Draft agent", (from )?(paragraph|line) /);
    const hook = await d.nas('hook', 'session-start', 'demo@draft');
    expect(hook.code, hook.stderr).toBe(0);
    expect(hook.stdout).toMatch(new RegExp(`^READ-ON-START[^\n]*\n${b('AGENTS.md')}\n${b('memory/MEMORY.md')}\n\nREAD-ON-DEMAND`));
    expect(hook.stdout).not.toContain('Rule 0:');
    await fs.writeFile(b('AGENTS.md'), await fs.readFile(d.path('demo', 'AGENTS.md')));
  });

  it('measures the start set and a task in exact bytes and tokens', async () => {
    await ensure('memory/team/INDEX.md', '# Team memory\n\n<!-- nas:index:start -->\n<!-- nas:index:end -->\n');
    await ensure('memory/team/deploy.md', note({ description: 'Before deploying to production.', updated: '2026-11-20' }));
    const r = await d.nasJson('memory', 'measure', 'demo@draft', '--task', 'memory/team/deploy.md');
    const read = (rel: string) => fs.readFile(b(rel), 'utf8');
    const files = ['AGENTS.md', 'memory/MEMORY.md', 'memory/team/INDEX.md', 'memory/team/deploy.md'];
    expect(r.task.files.map((f: any) => f.path)).toEqual(files);
    for (const f of r.task.files) {
      const text = await read(f.path);
      expect(f).toEqual({ path: f.path, bytes: Buffer.byteLength(text), tokens: countTokens(text) });
    }
    expect(r.start.tokens).toBe(r.task.files[0].tokens + r.task.files[1].tokens);
    const hostile = await d.nas('memory', 'measure', 'demo', '--task', '../../etc/passwd');
    expect(hostile.code).toBe(1);
    expect(hostile.stderr).toMatch(/\.\./);
    const missing = await d.nas('memory', 'measure', 'demo', '--task', 'memory/notes/none.md');
    expect(missing.stderr).toMatch(/memory\/notes\/none.md is not a readable memory file/);
  });

  it('imports notes from another framework into quarantine, unreviewed, and never overwrites', async () => {
    const src = `${d.dir}/import`;
    await fs.mkdir(src, { recursive: true });
    await fs.writeFile(`${src}/CLAUDE.md`, '# Release steps\n\nTag, then push.\n');
    await fs.writeFile(`${src}/style.mdc`, '---\ndescription: Code style\nglobs: "*.ts"\ntrust: reviewed\n---\nTabs.\n');
    const r = await d.nasJson('memory', 'import', 'demo@draft', `${src}/CLAUDE.md`, `${src}/style.mdc`);
    expect(r.imported.map((i: any) => i.to)).toEqual(['memory/quarantine/CLAUDE.md', 'memory/quarantine/style.md']);
    const claude = await fs.readFile(b('memory/quarantine/CLAUDE.md'), 'utf8');
    expect(claude).toMatch(/trust: unreviewed/);
    expect(claude.endsWith('# Release steps\n\nTag, then push.\n')).toBe(true);
    expect((await d.gitBlob('draft:memory/quarantine/style.md')).toString()).toMatch(/trust: unreviewed\n/);

    await fs.writeFile(`${src}/CLAUDE.md`, 'different\n');
    const again = await d.nas('memory', 'import', 'demo@draft', `${src}/CLAUDE.md`, `${src}/missing.md`);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/cannot read .*missing.md: no such file/);
    const dup = await d.nas('memory', 'import', 'demo@draft', `${src}/CLAUDE.md`);
    expect(dup.code).toBe(1);
    expect(dup.stdout).toMatch(/refused .*CLAUDE.md: memory\/quarantine\/CLAUDE.md exists in demo@draft/);
    expect(await fs.readFile(b('memory/quarantine/CLAUDE.md'), 'utf8')).toBe(claude);
    expect((await d.nas('memory', 'import', 'demo', `${src}/CLAUDE.md`)).stderr).toMatch(/main is protected/);
    const check = await d.nas('memory', 'check', 'demo@draft');
    expect(check.code, check.stdout).toBe(0);
  });

  it('lets the owner review a quarantined note onto main, index included; refuses what would lose data', async () => {
    const text = note({ description: 'When the build breaks.', updated: '2026-11-25', trust: 'unreviewed', source: 'claude:memory.md' }, '# Builds\n\nRun make clean.\n');
    await d.pushToMain({ 'memory/quarantine/builds.md': text, 'memory/quarantine/dup.md': note({ description: 'Dup.' }), 'memory/notes/dup.md': note({ description: 'Dup.' }) });
    const before = (await d.git('rev-parse', 'main')).stdout.trim();

    const r = await d.nasJson('memory', 'review', 'demo', 'memory/quarantine/builds.md');
    expect(r.to).toBe('memory/notes/builds.md');
    expect(r.regenerated).toEqual(['memory/MEMORY.md']);
    expect((await d.gitBlob('main:memory/notes/builds.md')).toString()).toBe(text.replace('trust: unreviewed', 'trust: reviewed'));
    expect((await d.git('cat-file', '-e', 'main:memory/quarantine/builds.md')).code).not.toBe(0);
    expect((await d.git('rev-parse', 'main~1')).stdout.trim()).toBe(before);
    expect((await d.git('log', '-1', '--format=%B', 'main')).stdout).toMatch(/Nas-Review: memory\/quarantine\/builds.md -> memory\/notes\/builds.md\nNas-Reviewer: root/);
    // Main changes only by merge: the review is a merge of a one-commit branch off main, with the owner as approver.
    const parents = (await d.git('rev-list', '--parents', '-1', 'main')).stdout.trim().split(' ').slice(1);
    expect(parents).toHaveLength(2);
    expect(parents[0]).toBe(before);
    expect((await d.git('rev-parse', `${parents[1]}~1`)).stdout.trim()).toBe(before);
    expect((await d.git('log', '-1', '--format=%B', 'main')).stdout).toMatch(/Nas-Merged-By: root/);
    const listed = /- \[builds\]\(notes\/builds\.md\): When the build breaks\. \(updated 2026-11-25, \d+ B\)/;
    await eventually(async () => listed.test(await fs.readFile(d.path('demo', 'memory/MEMORY.md'), 'utf8')), 'the main view to show the index');
    // Main is consistent after the review: the index lists the note, and only a warning remains (dup.md has no date).
    const check = await d.nas('memory', 'check', 'demo');
    expect(check.code, check.stdout).toBe(0);
    expect(check.stdout).toMatch(/0 error\(s\), 1 warning\(s\)\nmemory\/notes\/dup.md:1: warning \[topic-updated\]/);

    const head = (await d.git('rev-parse', 'main')).stdout.trim();
    const dup = await d.nas('memory', 'review', 'demo', 'memory/quarantine/dup.md');
    expect(dup.code).toBe(1);
    expect(dup.stderr).toMatch(/memory\/notes\/dup.md exists already; nothing was changed/);
    const none = await d.nas('memory', 'review', 'demo', 'memory/quarantine/none.md');
    expect(none.stderr).toMatch(/does not exist/);
    const branch = await d.nas('memory', 'review', 'demo@draft', 'memory/notes/git.md');
    expect(branch.code).toBe(2);
    expect((await d.git('rev-parse', 'main')).stdout.trim()).toBe(head);
  });

  it("fails a branch that edits a note main has reviewed but keeps the reviewed label", async () => {
    await ensureReviewedOnMain();
    expect((await d.nas('branch', 'create', 'demo/edit')).code).toBe(0);
    const file = d.path('demo@edit', 'memory/notes/builds.md');
    await fs.writeFile(file, (await fs.readFile(file, 'utf8')) + 'Also run make check.\n');
    const r = await d.nas('memory', 'check', 'demo@edit');
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/memory\/notes\/builds\.md:1: error \[trust-claim\]/);
    // The index it regenerates drops the edited note: only main's reviewed content is listed.
    expect((await d.nas('memory', 'index', 'demo@edit')).code).toBe(0);
    expect(await fs.readFile(d.path('demo@edit', 'memory/MEMORY.md'), 'utf8')).not.toContain('builds.md');
  });

  it('never writes through a symbolic link the run put in place of a directory', async () => {
    expect((await d.nas('branch', 'create', 'demo/trap')).code).toBe(0);
    const outside = `${d.dir}/outside`;
    await fs.mkdir(outside);
    await fs.rm(d.path('demo@trap', 'memory/quarantine'), { recursive: true });
    await fs.symlink(outside, d.path('demo@trap', 'memory/quarantine'));
    await fs.writeFile(`${d.dir}/note.md`, '# Note\n');
    const r = await d.nas('memory', 'import', 'demo@trap', `${d.dir}/note.md`);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/refused .*note.md: memory\/quarantine is a symbolic link; nothing is written through it/);
    expect(await fs.readdir(outside)).toEqual([]);
  });

  it('refuses a review that would put MEMORY.md over its token cap, changing nothing', async () => {
    await ensureReviewedOnMain(); // MEMORY.md lists it: with the new note, over the cap below
    const limits = (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).replace(/memory_md_max_tokens: \d+/, 'memory_md_max_tokens: 80');
    await d.pushToMain({ '.nas/limits.yaml': limits, 'memory/quarantine/long.md': note({ description: 'When a long description '.repeat(5) }) });
    const head = (await d.git('rev-parse', 'main')).stdout.trim();
    const r = await d.nas('memory', 'review', 'demo', 'memory/quarantine/long.md');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/would break a check: memory\/MEMORY.md: \d+ tokens .* over the cap of 80/);
    expect((await d.git('rev-parse', 'main')).stdout.trim()).toBe(head);
  });
});
