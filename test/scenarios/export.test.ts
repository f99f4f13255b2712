import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, run } from '../helpers.js';

/** nas export and nas import: a whole Home in one file, and back, every ref as it was. */
describe('export and import', () => {
  let d: TestDaemon;
  let other: TestDaemon | undefined;
  let file: string;
  /** A lease token of the exported Home, issued before the export. */
  let token: string;
  /** Every ref but the leases' and the PRs' (an import ends the leases it brings, and marks its PRs: see below). */
  const refsOf = async (state: string, role: string) => (await run('git', [`--git-dir=${state}/homes/${role}.git`, 'show-ref'])).stdout
    .split('\n').filter((l) => !l.endsWith(' refs/nas/leases') && !l.endsWith(' refs/nas/prs')).join('\n');

  beforeAll(async () => {
    d = await TestDaemon.withBranch('work');
    file = `${d.dir}/demo.bundle`;
  });
  afterAll(async () => {
    await other?.cleanup();
    await d?.cleanup();
  });

  it('writes every ref of a Home to one file, pending work committed first; the owner only', async () => {
    const p = (rel: string) => d.path('demo@work', rel);
    await fs.writeFile(p('outbox/secret.md'), 'only for me\n');
    await fs.chmod(p('outbox/secret.md'), 0o600);
    await fs.writeFile(p('outbox/gone.md'), 'to the recycle area\n');
    await d.sync('demo/work');
    await fs.unlink(p('outbox/gone.md'));
    expect((await d.nas('checkpoint', 'create', 'demo@work', 'before-export')).code).toBe(0);
    await fs.appendFile(p('AGENTS.md'), '\nA rule that waits.\n');
    expect((await d.nasJson('propose', 'demo/work', '--into', 'main', '--intent', 'travel with me')).state).toBe('waiting');
    await fs.writeFile(p('outbox/pending.md'), 'not committed yet\n');
    token = (await d.nas('lease', 'issue', 'demo/work', '--principal', 'nobody')).stdout.trim();
    const byLease = await d.nasWith({ NAS_LEASE: token, owner: false }, 'export', 'demo', `${d.dir}/by-lease.bundle`);
    expect(byLease.code).toBe(1);
    expect(byLease.stderr).toMatch(/owner action/);

    const r = await d.nasJson('export', 'demo', file);
    expect(r).toMatchObject({ role: 'demo', file });
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    expect(r.bytes).toBe((await fs.stat(file)).size);
    const heads = (await run('git', ['bundle', 'list-heads', file])).stdout;
    for (const ref of ['refs/heads/main', 'refs/heads/work', 'refs/nas/trash', 'refs/nas/checkpoints/before-export']) expect(heads).toContain(ref);
    expect((await d.gitBlob('work:outbox/pending.md')).toString()).toBe('not committed yet\n');
    const again = await d.nas('export', 'demo', file);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/exists; nothing was written/);
  });

  it('imports it on a fresh state directory with identical refs, files, modes, PRs and recycle area', async () => {
    other = await TestDaemon.start();
    const r = await other.nasJson('import', file);
    expect(r).toMatchObject({ role: 'demo', branches: ['work'] });
    expect(await refsOf(other.state, 'demo')).toBe(await refsOf(d.state, 'demo'));
    expect(await fs.readFile(other.path('demo@work', 'outbox/pending.md'), 'utf8')).toBe('not committed yet\n');
    expect((await fs.stat(other.path('demo@work', 'outbox/secret.md'))).mode & 0o777).toBe(0o600);
    expect(await fs.readFile(other.path('demo:before-export', 'outbox/secret.md'), 'utf8')).toBe('only for me\n');
    expect((await other.nasJson<any[]>('pr', 'list', 'demo')).map((p) => [p.intent, p.state])).toEqual([['travel with me', 'waiting']]);
    expect((await other.nasJson<any[]>('trash', 'list', 'demo')).map((t) => t.path)).toContain('outbox/gone.md');
    expect((await run('git', [`--git-dir=${other.state}/homes/demo.git`, 'fsck'])).code).toBe(0);
    // The imported Home works: a write in its branch commits.
    await fs.writeFile(other.path('demo@work', 'outbox/after.md'), 'after import\n');
    await other.sync('demo/work');
  });

  it('marks the PRs an imported Home brings as made in the Home exported, in nas pr list, inbox and show; not those made after', async () => {
    const [pr] = await other!.nasJson<any[]>('pr', 'list', 'demo');
    expect(pr.imported).toEqual({ from: 'demo', file, at: expect.any(String) });
    expect(Date.now() - Date.parse(pr.imported.at)).toBeLessThan(10 * 60_000);
    expect((await other!.nasJson<any[]>('pr', 'inbox')).find((x) => x.id === pr.id).imported).toEqual(pr.imported);
    // The text lists mark it too.
    for (const args of [['pr', 'inbox'], ['pr', 'list', 'demo']]) {
      expect((await other!.nas(...args)).stdout).toMatch(new RegExp(`\\b${pr.id} .*${pr.state} \\(imported from demo\\)`));
    }
    const shown = await other!.nas('pr', 'show', 'demo', String(pr.id));
    expect(shown.stdout).toContain(`imported: made in Home demo, came with ${file} on ${pr.imported.at}\n`);
    expect((await other!.nasJson('pr', 'show', 'demo', String(pr.id))).imported).toEqual(pr.imported);
    // Where it was made, the PR carries no mark; nor does one proposed in the copy.
    expect((await d.nasJson<any[]>('pr', 'list', 'demo'))[0].imported).toBeUndefined();
    expect((await other!.nas('branch', 'create', 'demo/fresh')).code).toBe(0);
    await fs.writeFile(other!.path('demo@fresh', 'outbox/fresh.md'), 'made here\n');
    const fresh = await other!.nasJson('propose', 'demo/fresh', '--into', 'main', '--intent', 'made here');
    expect(fresh.imported).toBeUndefined();
    expect((await other!.nasJson<any[]>('pr', 'list', 'demo')).map((p) => [p.intent, p.imported?.from])).toEqual([['travel with me', 'demo'], ['made here', undefined]]);
  });

  it('imports under another role; refuses a name that exists, a truncated file and a file that is not a bundle, leaving nothing', async () => {
    const copy = await d.nasJson('import', file, '--as', 'copy');
    expect(copy.role).toBe('copy');
    expect((await d.nasJson<any[]>('pr', 'list', 'copy'))[0].imported).toMatchObject({ from: 'demo', file });
    expect(await refsOf(d.state, 'copy')).toBe(await refsOf(d.state, 'demo'));
    expect(await fs.readFile(d.path('copy@work', 'outbox/secret.md'), 'utf8')).toBe('only for me\n');
    const taken = await d.nas('import', file);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toMatch(/a Home named "demo" exists already; nothing was imported/);
    const bundle = await fs.readFile(file);
    await fs.writeFile(`${d.dir}/truncated.bundle`, bundle.subarray(0, Math.floor(bundle.length / 2)));
    await fs.writeFile(`${d.dir}/text.bundle`, 'just some text\n');
    for (const bad of ['truncated.bundle', 'text.bundle']) {
      const r = await d.nas('import', `${d.dir}/${bad}`, '--as', 'broken');
      expect(r.code, bad).toBe(1);
      expect(r.stderr).toMatch(/is not a whole git bundle of a Home/);
    }
    const missing = await d.nas('import', `${d.dir}/nowhere.bundle`);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/is not a file/);
    expect((await fs.readdir(`${d.state}/homes`)).sort()).toEqual(['copy.git', 'demo.git']);
    expect((await d.nasJson<any[]>('home', 'list')).map((h) => h.role).sort()).toEqual(['copy', 'demo']);
  });

  it('ends the leases an imported Home brings: a token of the Home exported works in no copy of it', async () => {
    const live = (await d.nasJson<any[]>('lease', 'list', 'demo')).filter((l) => l.status === 'active').map((l) => l.id);
    expect(live.length).toBeGreaterThan(0);
    for (const [daemon, role] of [[other!, 'demo'], [d, 'copy']] as const) {
      const leases = await daemon.nasJson<any[]>('lease', 'list', role);
      expect(leases.filter((l) => live.includes(l.id)).map((l) => l.status), role).toEqual(live.map(() => 'revoked'));
    }
    // The token still works where it was issued, and not in the Home imported elsewhere under the same name.
    const sub = (daemon: TestDaemon) => daemon.nasWith({ NAS_LEASE: token, owner: false }, 'lease', 'issue', 'demo/work', '--principal', 'nobody', '--ttl', '1h');
    expect((await sub(d)).code).toBe(0);
    const there = await sub(other!);
    expect(there.code).toBe(1);
    expect(there.stderr).toMatch(/revoked/);
  });

  it('answers an export into a folder of the mount itself, which nasd serves while it writes there', async () => {
    // skills/ was never listed: opening it asks nasd, on the thread that writes the file (it must not wait on itself).
    await run('sh', ['-c', 'echo 2 > /proc/sys/vm/drop_caches']);
    const r = await d.nas('export', 'demo', `${d.path('demo@work')}/skills/demo.bundle`);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/skills takes no hard links \(a versioned folder of a Home\?\); nothing was written/);
    expect((await d.nas('status')).code).toBe(0);
    expect(await fs.readdir(d.path('demo@work', 'skills'))).toEqual(['README.md']);
  });
});
