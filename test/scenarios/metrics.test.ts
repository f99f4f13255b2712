import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';
import { key, parseExposition, total, type Exposition } from '../prom-text.js';

/**
 * Issue 24, part 2: nasd's /metrics after a scripted workload moved by exactly what the workload did: N writes in
 * a branch, one merge, one refusal with its errno, one rejection.
 */
describe('Prometheus metrics', () => {
  let d: TestDaemon;
  let url: string;
  const scrape = async (): Promise<Exposition> => {
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(await res.text());
  };
  const moved = (before: Exposition, after: Exposition, name: string, labels: Record<string, string> = {}) =>
    total(after, name, labels) - total(before, name, labels);

  beforeAll(async () => {
    d = await TestDaemon.withBranch('m', { extraArgs: ['--metrics-listen', '127.0.0.1:0'] });
    // Port 0: the port chosen is in nas status (and the log's "metrics ready" line).
    url = (await d.nasJson<{ metrics: string }>('status')).metrics;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(d.log).toContain(url);
    expect((await d.nas('status')).stdout).toContain(`metrics: ${url}\n`);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('counts what a scripted workload did: N writes, 1 merge, 1 EROFS, 1 rejection', async () => {
    const token = (await d.nas('lease', 'issue', 'demo/m', '--principal', 'alice', '--ttl', '1h')).stdout.trim();
    const mainAtStart = (await d.git('rev-parse', 'main')).stdout.trim();
    const before = await scrape();
    const N = 7;
    const sizes = Array.from({ length: N }, (_, i) => `metrics file ${i}\n`.repeat(i + 1));
    // One write(2) each (small files), each a new file; then everything committed.
    for (const [i, text] of sizes.entries()) await fs.writeFile(d.path('demo@m', `m${i}.md`), text);
    await d.sync('demo/m');
    // Main is read-only: one EROFS.
    expect(await codeOf(fs.writeFile(d.path('demo', 'refused.md'), 'no'))).toBe('EROFS');
    const proposed = await d.nasWith({ NAS_LEASE: token, owner: false }, '--json', 'propose', 'demo/m', '--into', 'main', '--intent', 'metrics');
    expect(proposed.code, proposed.stderr).toBe(0);
    expect(JSON.parse(proposed.stdout).state).toBe('merged');
    // A second branch whose deletion waits for the owner, who rejects it.
    expect((await d.nas('branch', 'create', 'demo/gone')).code).toBe(0);
    await fs.unlink(d.path('demo@gone', 'm0.md'));
    const waiting = await d.nasJson('propose', 'demo/gone', '--into', 'main', '--intent', 'drop m0.md');
    expect(waiting.state).toBe('waiting');
    expect((await d.nas('pr', 'reject', 'demo', String(waiting.id), '--why', 'keep it')).code).toBe(0);
    const after = await scrape();

    // FUSE: every request answered, refused or not (N creates in the branch and the one refused on main), N
    // writes (nasd's, or the binding's under a write grant: not timed, counted apart); the refusal by its errno.
    expect(moved(before, after, 'nas_fuse_request_duration_seconds_count', { op: 'create' })).toBe(N + 1);
    const granted = moved(before, after, 'nas_fuse_cache_requests', { by: 'write' });
    expect(granted).toBeGreaterThan(0);
    expect(moved(before, after, 'nas_fuse_request_duration_seconds_count', { op: 'write' }) + granted).toBe(N);
    expect(moved(before, after, 'nas_fuse_errors_total', { errno: 'EROFS' })).toBe(1);
    expect(moved(before, after, 'nas_fuse_errors_total', { op: 'create', errno: 'EROFS' })).toBe(1);
    expect(moved(before, after, 'nas_fuse_errors_total', { home: 'demo', op: 'create', errno: 'EROFS' })).toBe(1);
    expect(moved(before, after, 'nas_fuse_errors_total', { op: 'write' })).toBe(0);
    // Commits: exactly the branch's new commits (the writes, then the deletion), the bytes written, N files, 1 deletion.
    const count = async (...range: string[]) => Number((await d.git('rev-list', '--count', ...range)).stdout);
    const commits = (await count('m', `^${mainAtStart}`)) + (await count('main..gone'));
    expect(commits).toBeGreaterThanOrEqual(2);
    expect(moved(before, after, 'nas_commits_total')).toBe(commits);
    expect(moved(before, after, 'nas_commit_bytes_total')).toBe(sizes.reduce((n, s) => n + Buffer.byteLength(s), 0));
    expect(moved(before, after, 'nas_commit_paths_total', { change: 'written' })).toBe(N);
    expect(moved(before, after, 'nas_commit_paths_total', { change: 'deleted' })).toBe(1);
    expect(moved(before, after, 'nas_commit_latency_seconds_count')).toBe(commits);
    expect(moved(before, after, 'nas_commit_failures_total')).toBe(0);
    // One merge, by policy; one rejection after its wait.
    expect(moved(before, after, 'nas_merges_total')).toBe(1);
    expect(moved(before, after, 'nas_merges_total', { by: 'policy', result: 'merged' })).toBe(1);
    expect(moved(before, after, 'nas_pr_decisions_total', { decision: 'reject' })).toBe(1);
    expect(moved(before, after, 'nas_pr_decisions_total', { decision: 'approve' })).toBe(0);
    expect(moved(before, after, 'nas_pr_wait_seconds_count', { decision: 'reject' })).toBe(1);
    // State at scrape time.
    expect(after.samples.get(key('nas_prs', { home: 'demo', state: 'merged' }))).toBe(1);
    expect(after.samples.get(key('nas_prs', { home: 'demo', state: 'rejected' }))).toBe(1);
    expect(after.samples.get(key('nas_prs', { home: 'demo', state: 'waiting' }))).toBe(0);
    expect(after.samples.get(key('nas_pr_approval_ratio', { home: 'demo' }))).toBe(0);
    expect(after.samples.get(key('nas_leases', { home: 'demo', state: 'active' }))).toBe(1);
    expect(after.samples.get(key('nas_branches', { home: 'demo', state: 'live' }))).toBe(2);
    expect(after.samples.get(key('nas_pending_changes', { home: 'demo' }))).toBe(0);
    expect(after.samples.get(key('nas_home_bytes_used', { home: 'demo' }))).toBeGreaterThanOrEqual(sizes.reduce((n, s) => n + s.length, 0));
    expect(after.samples.get(key('nas_home_quota_bytes', { home: 'demo' }))).toBe(20 * 1024 ** 3);
    expect(after.samples.get(key('nas_homes', { state: 'mounted' }))).toBe(1);
    // The deletion in branch gone went to the recycle area (the merge deleted nothing).
    expect(moved(before, after, 'nas_trash_items', { home: 'demo' })).toBe(1);
    expect(moved(before, after, 'nas_trash_bytes', { home: 'demo' })).toBe(Buffer.byteLength(sizes[0]));
    expect(after.samples.get('process_resident_memory_bytes')).toBeGreaterThan(0);

    // State is read again when it moves (and only then): a purge empties the recycle area at the next scrape.
    expect(total(await scrape(), 'nas_trash_items')).toBe(total(after, 'nas_trash_items'));
    expect((await d.nas('trash', 'purge', 'demo', '--older-than', '0d')).code).toBe(0);
    const purged = await scrape();
    expect(total(purged, 'nas_trash_items', { home: 'demo' })).toBe(0);
    expect(total(purged, 'nas_trash_bytes', { home: 'demo' })).toBe(0);
  });

  it.skipIf(spawnSync('promtool', ['--version']).status !== 0)("a live scrape passes promtool check metrics (but for prom-client's nodejs_active_*_total)", async () => {
    const r = spawnSync('promtool', ['check', 'metrics'], { input: await (await fetch(url)).text(), encoding: 'utf8' });
    const problems = `${r.stdout}${r.stderr}`.trim().split('\n').filter(Boolean);
    expect(problems.filter((p) => !/^nodejs_active_\w+_total non-counter metrics should not have "_total" suffix$/.test(p))).toEqual([]);
    expect([0, 3]).toContain(r.status);
  });

  it('serves nothing else on its listener, and refuses a change', async () => {
    expect((await fetch(url.replace('/metrics', '/'))).status).toBe(404);
    expect((await fetch(url, { method: 'POST' })).status).toBe(405);
  });

  it("shows what an operator acts on: the Store's size at once, runs by exit, a failing mirror, in the metrics and nas status", async () => {
    // The Store's size without a maintenance pass first.
    expect(total(await scrape(), 'nas_store_bytes', { home: 'demo' })).toBeGreaterThan(0);

    // Runs by how they ended: a failure (exit 3) is not counted with a success.
    for (const cmd of ['exit 3', 'exit 0']) {
      const r = await d.nas('run', 'demo', '--user', 'nobody', '--intent', cmd, '--', 'sh', '-c', cmd);
      expect(r.code, r.stderr).toBe(Number(cmd.slice(5)));
    }
    const ran = await scrape();
    expect(ran.samples.get(key('nas_runs_ended', { home: 'demo', exit: '3' }))).toBe(1);
    expect(ran.samples.get(key('nas_runs_ended', { home: 'demo', exit: '0' }))).toBe(1);

    // A mirror that starts refusing pushes: counted, and named in nas status; healthy again once it takes them.
    const mirror = `${d.dir}/mirror.git`;
    expect((await run('git', ['init', '-q', '--bare', mirror])).code).toBe(0);
    expect((await d.nas('remote', 'add', 'demo', mirror)).code).toBe(0);
    await fs.writeFile(`${mirror}/hooks/pre-receive`, '#!/bin/sh\necho refused by the test >&2\nexit 1\n', { mode: 0o755 });
    expect((await d.nas('branch', 'create', 'demo/mirrored')).code).toBe(0);
    const failing = await eventually(async () => {
      const e = await scrape();
      return (e.samples.get(key('nas_remote_push_failures', { home: 'demo', remote: 'nas-1' })) ?? 0) > 0 && e;
    }, 'the failed push to be counted', 30_000);
    const lastGood = failing.samples.get(key('nas_remote_last_push_timestamp_seconds', { home: 'demo', remote: 'nas-1' }))!;
    expect(lastGood).toBeGreaterThan(Date.now() / 1000 - 600);
    const status = await d.nasJson('status');
    expect(status.problems).toEqual([expect.stringMatching(/^Home demo: mirroring to remote nas-1 failed \d+ time\(s\) in a row; last good push .*\(nas remote list demo\)$/)]);
    expect(status.version).toBe(JSON.parse(await fs.readFile(new URL('../../package.json', import.meta.url), 'utf8')).version);
    expect(Date.parse(status.started)).toBeLessThanOrEqual(Date.now());
    // One PR waits for a person (a deletion), and the status says so.
    expect((await d.nas('branch', 'create', 'demo/del')).code).toBe(0);
    await fs.unlink(d.path('demo@del', 'm1.md'));
    expect((await d.nasJson('propose', 'demo/del', '--into', 'main', '--intent', 'drop it')).state).toBe('waiting');
    const text = (await d.nas('status')).stdout;
    expect(text).toMatch(new RegExp(`^nasd ${status.version}, pid \\d+, up \\S+`));
    expect(text).toMatch(/^demo +[0-9a-f]{12} +1 +/m);
    expect(text).toMatch(/^problems:\n  Home demo: mirroring to remote nas-1 failed/m);
    await fs.rm(`${mirror}/hooks/pre-receive`);
    await eventually(async () => (await scrape()).samples.get(key('nas_remote_push_failures', { home: 'demo', remote: 'nas-1' })) === 0, 'the mirror to be healthy again', 60_000);
    expect(total(await scrape(), 'nas_remote_last_push_timestamp_seconds', { home: 'demo' })).toBeGreaterThan(lastGood);
    expect((await d.nasJson('status')).problems).toEqual([]);
  });
});
