import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { TestDaemon, eventually, run } from '../helpers.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

/**
 * Memory scopes (SPEC.md, "Two-tier memory"): index markers are opt-in per scope, and a shared scope is a Home
 * whose reviewed memory other Homes read on demand, curated through PRs into it (`nas memory share`).
 */

const note = (fields: Record<string, string>, body = 'Body.\n') =>
  `---\n${Object.entries(fields).map(([k, v]) => `${k}: ${v}`).join('\n')}\n---\n${body}`;

describe('memory scopes', () => {
  let d: TestDaemon;
  let role: string;

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    await fs.chmod(d.dir, 0o755);
    expect((await d.nas('home', 'create', 'team')).code).toBe(0);
    role = await fs.readFile(d.path('demo', '.nas/role.yaml'), 'utf8');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('keeps single-file memory in a Home whose MEMORY.md has no index markers; adding them turns the index on', async () => {
    const single = '# Memory\n\nEverything this agent keeps, in one file: deploy with make deploy.\n';
    await d.pushToMain({
      'memory/MEMORY.md': single,
      'memory/notes/deploy.md': note({ description: 'Before deploying.', updated: '2026-11-20', trust: 'reviewed' }),
    }, 'owner: single-file memory');
    await eventually(async () => (await fs.readFile(d.path('demo', 'memory/MEMORY.md'), 'utf8')) === single, 'main to show the new MEMORY.md');

    const check = await d.nas('memory', 'check', 'demo');
    expect(check.code, check.stdout).toBe(0);
    expect(check.stdout).not.toMatch(/\[index-markers\]/);
    expect(check.stdout).toContain('memory/MEMORY.md: single-file memory (no index markers; add them to turn the index on)\n');

    // The resident layer is the file as it is.
    const context = await d.nas('context', 'demo');
    expect(context.code).toBe(0);
    expect(context.stdout).toContain(`READ-ON-START (read these now, in this order):\n${d.path('demo', 'AGENTS.md')}\n${d.path('demo', 'memory/MEMORY.md')}\n`);
    expect(context.stdout).toContain('READ-ON-DEMAND (read one only when the task needs it):\n');
    expect((await d.nas('briefing', 'demo')).stdout).toContain(single.trim());

    // Nothing generates an index into it.
    expect((await d.nas('branch', 'create', 'demo/idx')).code).toBe(0);
    const none = await d.nasJson('memory', 'index', 'demo@idx');
    expect(none.written).toEqual([]);
    expect(await fs.readFile(d.path('demo@idx', 'memory/MEMORY.md'), 'utf8')).toBe(single);

    // Adding the markers opts in: the index is generated and checked.
    await fs.writeFile(d.path('demo@idx', 'memory/MEMORY.md'), `${single}\n<!-- nas:index:start -->\n<!-- nas:index:end -->\n`);
    const stale = await d.nas('memory', 'check', 'demo@idx');
    expect(stale.code).toBe(1);
    expect(stale.stdout).toMatch(/memory\/MEMORY\.md:5: error \[index-stale\]/);
    expect((await d.nasJson('memory', 'index', 'demo@idx')).written).toEqual(['memory/MEMORY.md']);
    expect(await fs.readFile(d.path('demo@idx', 'memory/MEMORY.md'), 'utf8')).toMatch(/- \[deploy\]\(notes\/deploy\.md\): Before deploying\./);
    expect((await d.nas('context', 'demo@idx')).stdout).toContain("READ-ON-DEMAND (read one only when the task needs it; memory/MEMORY.md's index says when):\n");
  });

  it('shares a reviewed note with a shared Home through a PR there, and lists its index on demand in the Homes that read it', async () => {
    await d.pushToMain({
      '.nas/role.yaml': `${role}shared: [team]\n`,
      'memory/notes/release.md': note({ description: 'When cutting a release.', updated: '2026-11-21', trust: 'reviewed' }, '# Release\n\nTag, then push.\n'),
      'memory/notes/draft.md': note({ description: 'Half-formed idea.', updated: '2026-11-21', trust: 'unreviewed' }),
    }, 'owner: demo reads team');
    const prsOfTeam = async () => (await d.nasJson('pr', 'list', 'team')) as any[];

    // A note that is not reviewed is refused, and nothing reaches team.
    const refused = await d.nas('memory', 'share', 'demo', 'memory/notes/draft.md', '--to', 'team');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/memory\/notes\/draft\.md is not reviewed in demo's main: only reviewed notes are shared\. Review it first: nas memory review demo memory\/notes\/draft\.md \(nothing was shared\)/);
    expect(await prsOfTeam()).toEqual([]);
    const usage = await d.nas('memory', 'share', 'demo', 'memory/notes/release.md');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--to <shared-home>/);

    // A reviewed note is proposed to team as a PR there, through team's gate.
    const shared = await d.nasJson('memory', 'share', 'demo', 'memory/notes/release.md', '--to', 'team');
    expect(shared.path).toBe('memory/quarantine/from-demo/release.md');
    const [pr] = await prsOfTeam();
    expect(pr).toMatchObject({ id: shared.pr, branch: shared.branch });
    expect(pr.checks).not.toContain('FAIL');
    // Unreviewed notes in quarantine are low risk: team's policy merges it (a team with merge.auto: false would wait).
    expect(pr).toMatchObject({ state: 'merged', merged_by: 'policy' });
    const copy = d.path('team', shared.path);
    await eventually(async () => (await fs.readFile(copy, 'utf8').catch(() => '')).includes('Tag, then push.'), "team's main to show the merged copy");
    const text = await fs.readFile(copy, 'utf8');
    expect(text).toMatch(/trust: unreviewed/);
    expect(text).toMatch(/source: demo@[0-9a-f]{12}:memory\/notes\/release\.md/);

    // Unreviewed in team, it is not in the index demo reads yet; team's MEMORY.md is, labelled, on demand only.
    const before = await d.nas('context', 'demo');
    const [start, demand] = before.stdout.split('READ-ON-DEMAND');
    expect(demand).toContain(`${d.path('team', 'memory/MEMORY.md')}  [shared: team]\n`);
    expect(start).not.toContain(d.path('team'));
    expect(before.stdout).not.toContain('release.md  [shared: team]');

    // team's owner reviews it into team's index: demo's context lists it under read-on-demand, with team's name.
    const reviewed = await d.nasJson('memory', 'review', 'team', shared.path);
    expect(reviewed.to).toBe('memory/notes/from-demo/release.md');
    const line = `${d.path('team', 'memory/notes/from-demo/release.md')}  [shared: team] When cutting a release.\n`;
    for (const args of [['context', 'demo'], ['hook', 'session-start', 'demo']]) {
      const r = await d.nas(...args);
      expect(r.code, r.stderr).toBe(0);
      const [head, onDemand] = r.stdout.split('READ-ON-DEMAND');
      expect(onDemand).toContain(line);
      expect(head).not.toContain('release.md');
    }
    // A Home that does not list team does not read it.
    expect((await d.nas('context', 'team')).stdout).not.toContain('[shared:');
    // Inside a run of demo the path the context lists reads through the mount (team's main, read-only).
    const out = `${d.dir}/shared-read`;
    await fs.mkdir(out);
    await fs.chmod(out, 0o1777);
    const env = { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' };
    const ran = await run(process.execPath, [CLI, '--socket', d.socket, 'run', 'demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `cat ${d.path('team', 'memory/notes/from-demo/release.md')} > ${out}/note`], { env });
    expect(ran.code, ran.stderr).toBe(0);
    expect(await fs.readFile(`${out}/note`, 'utf8')).toContain('When cutting a release.');
  });

  it('reports a shared Home that does not exist in memory check, and the context still works', async () => {
    await d.pushToMain({ '.nas/role.yaml': `${role}shared: [team, nosuch]\n` }, 'owner: a typo in shared');
    const check = await d.nas('memory', 'check', 'demo');
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/\.nas\/role\.yaml: error \[shared-scope\] shared names "nosuch": no Home named "nosuch"/);
    const context = await d.nas('context', 'demo');
    expect(context.code, context.stderr).toBe(0);
    expect(context.stdout).toContain(`${d.path('team', 'memory/MEMORY.md')}  [shared: team]\n`);
    expect(context.stdout).toMatch(/\(shared memory of nosuch left out: no Home named "nosuch"/);

    const bad = await d.nas('memory', 'share', 'demo', 'memory/notes/release.md', '--to', 'nosuch');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/no Home named "nosuch"/);
  });
});
