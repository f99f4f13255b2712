import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';

/** Issue 23, item 11: a refusal's reason reaches the person who met it (`nas why <path>`), not only nasd's log. */
describe('nas why', () => {
  let d: TestDaemon;
  const asUser = (uid: number, script: string) => run('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'sh', '-c', script]);

  beforeAll(async () => {
    d = await TestDaemon.withBranch('why');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it("says why a write to main's AGENTS.md was refused, and names a branch to write in", async () => {
    const agents = d.path('demo', 'AGENTS.md');
    expect(await codeOf(fs.writeFile(agents, 'mine'))).toBe('EROFS');
    const why = await d.nas('why', agents);
    expect(why.code, why.stderr).toBe(0);
    expect(why.stdout).toContain(agents);
    expect(why.stdout).toMatch(/EROFS/);
    expect(why.stdout).toMatch(/read-only: write in a branch, e\.g\. demo@<branch>/);
    expect(why.stdout).toMatch(/nas branch create demo\/<branch>/);
    // The same by <role>/<path>, and as JSON.
    const json = await d.nasJson<{ refusals: { path: string; code: string; uid: number }[] }>('why', 'demo/AGENTS.md');
    expect(json.refusals[0]).toEqual(expect.objectContaining({ path: agents, code: 'EROFS', uid: 0 }));
    // Nothing was refused elsewhere.
    expect((await d.nas('why', d.path('demo@why', 'AGENTS.md'))).stdout).toMatch(/no refusal recorded/);
  });

  it('says a repository belongs in workspace/ when git init or mkdir .git meets a versioned folder', async () => {
    const repo = d.path('demo@why', 'outbox/repo');
    await fs.mkdir(repo, { recursive: true });
    const init = await run('git', ['init', '-q', repo]);
    expect(init.code).not.toBe(0);
    expect(await codeOf(fs.mkdir(`${repo}/.git`))).toBe('EPERM');
    const why = await d.nas('why', 'demo@why/outbox/repo');
    expect(why.code, why.stderr).toBe(0);
    expect(why.stdout).toContain(`${repo}/.git`);
    expect(why.stdout).toMatch(/EPERM/);
    expect(why.stdout).toMatch(/under workspace\//);
    // In workspace/ the same works.
    expect((await run('git', ['init', '-q', d.path('demo@why', 'workspace/repo')])).code).toBe(0);
  });

  it("shows a non-owner only its own user's refusals; the owner sees everyone's", async () => {
    expect((await d.nas('branch', 'create', 'demo/shared')).code).toBe(0);
    const token = (await d.nas('lease', 'issue', 'demo/shared', '--principal', 'nobody', '--ttl', '1h')).stdout.trim();
    const q = (rel: string) => d.path('demo@shared', rel);
    const opened = await asUser(65534, `mkdir '${q('outbox/open')}' && chmod 1777 '${q('outbox/open')}'`);
    expect(opened.code, opened.stderr).toBe(0);
    // Another user, without a lease, is refused by nasd (the folder's mode lets the kernel pass it on).
    expect((await asUser(4343, `echo x > '${q('outbox/open/theirs.md')}'`)).code).not.toBe(0);
    // The principal meets a refusal of its own.
    expect((await asUser(65534, `mkdir '${q('outbox/open/.git')}'`)).code).not.toBe(0);

    const everyone = await d.nasJson<{ shown: string; refusals: { uid: number; code: string }[] }>('why', q('outbox/open'));
    expect(everyone.shown).toBe('all');
    expect(everyone.refusals.map((r) => [r.uid, r.code])).toEqual(expect.arrayContaining([[4343, 'EACCES'], [65534, 'EPERM']]));

    const mine = await d.nasWith({ NAS_LEASE: token, owner: false }, '--json', 'why', q('outbox/open'));
    expect(mine.code, mine.stderr).toBe(0);
    const shown = JSON.parse(mine.stdout) as { shown: { uid: number }; refusals: { uid: number; why: string }[] };
    expect(shown.shown).toEqual({ uid: 65534 });
    expect(shown.refusals.length).toBeGreaterThan(0);
    expect(shown.refusals.every((r) => r.uid === 65534)).toBe(true);
    expect(shown.refusals[0].why).toMatch(/workspace\//);
    // Without any credential nasd cannot tell who asks: nothing is shown, and it says how to ask.
    const nobody = await d.nasWith({ owner: false }, 'why', q('outbox/open'));
    expect(nobody.stdout).not.toMatch(/EACCES|EPERM/);
    expect(nobody.stdout).toMatch(/NAS_LEASE/);
  });

  it("says first, to anyone, that main is read-only, and that the kernel's own \"Permission denied\" is that refusal for a user the modes keep out", async () => {
    const agents = d.path('demo', 'AGENTS.md');
    // A user who is neither root nor the owner: the kernel's check (default_permissions) refuses before nasd sees it.
    for (const script of [`echo x > '${agents}'`, `echo x >> '${agents}'`, `mkdir '${d.path('demo', 'mine')}'`, `rm -f '${agents}'`]) {
      const denied = await asUser(4343, script);
      expect(denied.code, script).not.toBe(0);
      expect(denied.stderr, script).toMatch(/Permission denied/);
    }
    const line = new RegExp(`^${d.path('demo').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: demo is main, the protected main line, read-only: write in a branch.*` +
      '"Read-only file system" \\(EROFS\\), or "Permission denied" \\(EACCES\\) from the kernel\'s own check where the mode bits keep the user out');
    // Asked without a credential (nasd cannot tell who asks, so it lists no refusal), the first line still says it.
    const anyone = await d.nasWith({ owner: false }, 'why', agents);
    expect(anyone.code, anyone.stderr).toBe(0);
    expect(anyone.stdout.split('\n')[0]).toMatch(line);
    expect(anyone.stdout).toMatch(/cannot tell who you are/);
    // The owner gets it first too, above the refusals listed; and in JSON.
    expect(await codeOf(fs.writeFile(agents, 'again'))).toBe('EROFS');
    const owner = await d.nas('why', agents);
    expect(owner.stdout.split('\n')[0]).toMatch(line);
    expect(owner.stdout.split('\n')[1]).toMatch(/open .*AGENTS\.md: EROFS by uid 0/);
    expect((await d.nasJson<{ readOnly: string }>('why', 'demo/AGENTS.md')).readOnly).toMatch(/demo is main/);
    // A commit view is history, read-only as well; a branch says nothing of the kind.
    const head = (await run('git', [`--git-dir=${d.state}/homes/demo.git`, 'rev-parse', '--short=12', 'main'])).stdout.trim();
    const history = await d.nas('why', `demo:${head}/AGENTS.md`);
    expect(history.stdout.split('\n')[0]).toMatch(new RegExp(`demo:${head}: demo:${head} is history \\(a checkpoint or a commit\\), read-only.*Permission denied`));
    const branch = await d.nas('why', d.path('demo@why', 'AGENTS.md'));
    expect(branch.stdout).not.toMatch(/read-only|Permission denied/);
    // A branch whose TTL passed is read-only too, and says how it takes writes again.
    expect((await d.nas('branch', 'create', 'demo/lapsed', '--ttl', '1s')).code).toBe(0);
    await eventually(async () => (await d.nasJson<{ name: string; expired?: boolean }[]>('branch', 'list', 'demo')).find((b) => b.name === 'lapsed' && b.expired), 'the branch to expire', 15_000);
    const lapsed = await d.nasWith({ owner: false }, 'why', 'demo@lapsed/AGENTS.md');
    expect(lapsed.stdout.split('\n')[0]).toMatch(/demo@lapsed: demo@lapsed expired at .*, read-only until it is removed \(nas branch extend demo\/lapsed --ttl <duration>.*Permission denied/);
  });

  it('refuses a path that is not under the mount', async () => {
    const r = await d.nas('why', '/etc/passwd');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/not under the mount/);
  });
});
