import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/daemon/config.js';
import { mountCall } from '../../src/daemon/mount-helper.js';
import { Meter, meter } from '../../src/metrics/meter.js';
import { clusterMeter } from '../../src/cluster/cluster-meter.js';
import type { HomeSample } from '../../src/metrics/state-gauges.js';
import { key, parseExposition, total } from '../prom-text.js';

const home = (name: string, more: Partial<HomeSample> = {}): HomeSample => ({
  home: name, branches: 3, expiredBranches: 1, pendingChanges: 2, bytesUsed: 1000, quotaBytes: 20_000, fullestBranch: 0.25,
  trashItems: 4, trashBytes: 400, prs: { merged: 2, waiting: 1 }, approved: 1, rejected: 1, oldestWaiting: 90,
  leases: { active: 1, revoked: 2 }, runs: { exited: 3 }, runExits: { 0: 2, 3: 1 },
  store: { loose: 1, looseBytes: 10, packed: 20, packBytes: 2000 }, remotes: [{ name: 'nas-1', pushed: 1_700_000_000_000, failures: 0 }, { name: 'nas-2', failures: 4 }],
  ...more,
});

/** `promtool check metrics` from Debian's prometheus package, when it is installed. */
const promtool = spawnSync('promtool', ['--version']).status === 0;

describe('metrics exposition', () => {
  it('is off until enabled: events cost a boolean test and record nothing', async () => {
    const m = new Meter();
    expect(m.start()).toBe(0);
    m.fuse('getattr', 0);
    m.fuseError('demo', 'create', 'EROFS');
    m.commit(0.1, 10, 1, 0);
    await expect(m.expose()).rejects.toThrow(/off/);
  });

  async function exposed(): Promise<string> {
    const m = new Meter();
    m.enable();
    for (const op of ['getattr', 'getattr', 'write', 'create']) m.fuse(op, m.start());
    m.fuseError('demo', 'create', 'EROFS');
    m.fuseError('', 'getattr', 'ENOENT');
    m.commit(0.12, 300, 2, 1);
    m.commitFailed();
    m.merge('policy', 'merged', 0.2);
    m.merge('owner', 'conflict', 0.3);
    m.decided('approve', 3600);
    m.decided('reject', 120);
    m.maintained({ purged: 2, expiredPrs: 1, seconds: 1.5 });
    m.purged(3);
    m.gc('auto', true);
    m.sampleWith(async () => ({ homes: [home('demo'), home('we"ird\\name', { approved: 0, rejected: 0 })], archived: 1 }));
    return m.expose();
  }

  it('is valid Prometheus text: declared families, escaped labels, cumulative buckets, the counts that were recorded', async () => {
    const e = parseExposition(await exposed());
    expect(total(e, 'nas_fuse_request_duration_seconds_count', { op: 'getattr' })).toBe(2);
    expect(total(e, 'nas_fuse_request_duration_seconds_count')).toBe(4);
    expect(e.samples.get(key('nas_fuse_errors_total', { home: 'demo', op: 'create', errno: 'EROFS' }))).toBe(1);
    expect(e.samples.get(key('nas_fuse_errors_total', { home: '', op: 'getattr', errno: 'ENOENT' }))).toBe(1);
    expect(e.samples.get('nas_commits_total')).toBe(1);
    expect(e.samples.get('nas_commit_bytes_total')).toBe(300);
    expect(e.samples.get(key('nas_commit_paths_total', { change: 'deleted' }))).toBe(1);
    expect(e.samples.get(key('nas_merges_total', { by: 'policy', result: 'merged' }))).toBe(1);
    expect(e.samples.get(key('nas_pr_wait_seconds_count', { decision: 'approve' }))).toBe(1);
    expect(e.samples.get(key('nas_pr_wait_seconds_bucket', { decision: 'approve', le: '3600' }))).toBe(1);
    expect(e.samples.get('nas_maintenance_purged_total')).toBe(5);
    expect(e.samples.get(key('nas_store_objects', { home: 'demo', where: 'packed' }))).toBe(20);
    expect(e.samples.get(key('nas_store_bytes', { home: 'demo', where: 'packed' }))).toBe(2000);
    // Runs by exit status; a remote's last good push (absent when none since start) and failures since.
    expect(e.samples.get(key('nas_runs_ended', { home: 'demo', exit: '3' }))).toBe(1);
    expect(e.samples.get(key('nas_runs_ended', { home: 'demo', exit: '0' }))).toBe(2);
    expect(e.samples.get(key('nas_remote_last_push_timestamp_seconds', { home: 'demo', remote: 'nas-1' }))).toBe(1_700_000_000);
    expect(e.samples.has(key('nas_remote_last_push_timestamp_seconds', { home: 'demo', remote: 'nas-2' }))).toBe(false);
    expect(e.samples.get(key('nas_remote_push_failures', { home: 'demo', remote: 'nas-2' }))).toBe(4);
    // Scrape-time state, every state present (0 when none) so a dashboard's series exist from the start.
    expect(e.samples.get(key('nas_branches', { home: 'demo', state: 'live' }))).toBe(2);
    expect(e.samples.get(key('nas_prs', { home: 'demo', state: 'conflict' }))).toBe(0);
    expect(e.samples.get(key('nas_pr_approval_ratio', { home: 'demo' }))).toBe(0.5);
    expect(e.samples.get(key('nas_runs', { home: 'demo', state: 'running' }))).toBe(0);
    expect(e.samples.get(key('nas_homes', { state: 'archived' }))).toBe(1);
    // A Home name with a quote and a backslash is escaped; without decisions it has no approval ratio.
    expect(e.samples.get(key('nas_trash_bytes', { home: 'we"ird\\name' }))).toBe(400);
    expect(e.samples.has(key('nas_pr_approval_ratio', { home: 'we"ird\\name' }))).toBe(false);
    // Node's own: memory and event-loop lag.
    expect(e.families.get('process_resident_memory_bytes')?.type).toBe('gauge');
    expect(e.families.get('nodejs_eventloop_lag_seconds')?.type).toBe('gauge');
    // nasd's own names: nas_ prefix, counters end in _total, every family says what it is.
    const ours = [...e.families.values()].filter((f) => f.name.startsWith('nas_'));
    expect(ours.length).toBeGreaterThan(25);
    for (const f of ours) {
      expect(f.help.length, f.name).toBeGreaterThan(10);
      if (f.type === 'counter') expect(f.name).toMatch(/_total$/);
    }
  });

  it('drops a Home that went away at the next scrape', async () => {
    const m = new Meter();
    m.enable();
    let homes = [home('a'), home('b')];
    m.sampleWith(async () => ({ homes, archived: 0 }));
    expect(total(parseExposition(await m.expose()), 'nas_trash_items')).toBe(8);
    homes = [home('a')];
    const e = parseExposition(await m.expose());
    expect(total(e, 'nas_trash_items')).toBe(4);
    expect([...e.samples.keys()].some((k) => k.includes('home="b"'))).toBe(false);
  });

  it.skipIf(!promtool)('passes promtool check metrics (but for prom-client\'s own gauges named *_total)', async () => {
    const r = spawnSync('promtool', ['check', 'metrics'], { input: await exposed(), encoding: 'utf8' });
    // promtool's lint (exit 3) names prom-client's default nodejs_active_*_total gauges, which every Node
    // exporter has; nasd's own names pass, and the text parses (exit 1 would be a parse error).
    const problems = `${r.stdout}${r.stderr}`.trim().split('\n').filter(Boolean);
    expect(problems.filter((p) => !/^nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/.test(p))).toEqual([]);
    expect([0, 3]).toContain(r.status);
  });

  /**
   * The cluster's families (src/cluster/cluster-meter.ts): made on first use in the process's one meter, as
   * nasd does when metrics are on. Every call of clusterMeter once.
   */
  async function clusterExposed(): Promise<string> {
    meter.enable();
    clusterMeter.writer('demo', true);
    clusterMeter.writer('ops', false);
    clusterMeter.failover('demo');
    clusterMeter.published('demo');
    clusterMeter.published('demo');
    clusterMeter.queue('demo', 3);
    clusterMeter.lag('demo', 0.4);
    clusterMeter.etcd(0.003);
    return meter.expose();
  }

  it('the cluster\'s families: valid text, counters ending in _total, each with its help, the values recorded', async () => {
    const e = parseExposition(await clusterExposed());
    const names = ['nas_cluster_writer', 'nas_cluster_queue_depth', 'nas_cluster_main_lag_seconds', 'nas_cluster_failovers_total', 'nas_cluster_published_total', 'nas_cluster_etcd_seconds'];
    expect([...e.families.keys()].filter((f) => f.startsWith('nas_cluster_')).sort()).toEqual([...names].sort());
    for (const name of names) {
      const f = e.families.get(name)!;
      expect(f.help.length, name).toBeGreaterThan(10);
      if (f.type === 'counter') expect(name).toMatch(/_total$/);
    }
    expect(e.samples.get(key('nas_cluster_writer', { home: 'demo' }))).toBe(1);
    expect(e.samples.get(key('nas_cluster_writer', { home: 'ops' }))).toBe(0);
    expect(e.samples.get(key('nas_cluster_published_total', { home: 'demo' }))).toBe(2);
    expect(e.samples.get(key('nas_cluster_queue_depth', { home: 'demo' }))).toBe(3);
    expect(e.samples.get('nas_cluster_etcd_seconds_count')).toBe(1);
  });

  it("the Grafana dashboard (contrib/grafana/agent-nas.json) asks only for metrics nasd exposes", async () => {
    // nasd's own families and, in a cluster, the cluster's (the same registry when nasd runs).
    const e = parseExposition(await exposed());
    for (const [name, family] of parseExposition(await clusterExposed()).families) if (name.startsWith('nas_cluster_')) e.families.set(name, family);
    const dash = JSON.parse(await fs.readFile(path.resolve(import.meta.dirname, '../../contrib/grafana/agent-nas.json'), 'utf8'));
    const exprs: string[] = dash.panels.flatMap((p: { targets?: { expr: string }[] }) => (p.targets ?? []).map((t) => t.expr));
    expect(exprs.length).toBeGreaterThan(30);
    const named = new Set(exprs.flatMap((x) => [...x.matchAll(/\b((?:nas|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1])));
    const families = new Set([...e.families.keys()]);
    const unknown = [...named].filter((n) => !families.has(n) && !families.has(n.replace(/_(bucket|count|sum)$/, '')));
    expect(unknown).toEqual([]);
    // Every family of nasd's own shows on the dashboard.
    const shown = new Set([...named].map((n) => n.replace(/_(bucket|count|sum)$/, '')));
    expect([...families].filter((f) => f.startsWith('nas_') && !shown.has(f))).toEqual([]);
  });

  it('the parser refuses what is not the format', () => {
    expect(() => parseExposition('x 1\n')).toThrow(/no declared family/);
    expect(() => parseExposition('# TYPE x counter\nx{a="1} 2\n')).toThrow(/not closed|bad value|not a sample/);
    expect(() => parseExposition('# TYPE x counter\nx -1\n')).toThrow(/below 0/);
    expect(() => parseExposition('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n')).toThrow(/cumulative/);
    expect(() => parseExposition('# TYPE x gauge\nx 1')).toThrow(/newline/);
  });
});

describe('metrics_listen', () => {
  it('is off by default; set by --metrics-listen, by the config file, and by the mount helper\'s -o metrics_listen=', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-metrics-config-'));
    try {
      const file = `${dir}/nasd.yaml`;
      await fs.writeFile(file, 'metrics_listen: 127.0.0.1:9465\n');
      const empty = `${dir}/empty.yaml`;
      await fs.writeFile(empty, '');
      expect((await loadConfig(['--config', empty])).metrics_listen).toBe('off');
      expect((await loadConfig(['--config', file])).metrics_listen).toBe('127.0.0.1:9465');
      expect((await loadConfig(['--config', file, '--metrics-listen', '0.0.0.0:0'])).metrics_listen).toBe('0.0.0.0:0');
      await expect(loadConfig(['--config', empty, '--metrics-listen', '9465'])).rejects.toThrow(/metrics_listen "9465": give host:port/);
      expect(mountCall(['nasd', '/agents', '-o', 'state_dir=/s,metrics_listen=127.0.0.1:9465'])!.flags).toEqual(
        ['--mount', '/agents', '--state-dir', '/s', '--metrics-listen', '127.0.0.1:9465']);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
