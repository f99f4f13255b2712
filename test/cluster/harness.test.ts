import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DIR_PREFIX, eventually, removeTree, run } from '../helpers.js';
import { startEtcd, startGitServer, type EtcdCluster, type GitServer } from './harness.js';

/**
 * The cluster suite's real parts behave as its scenarios assume: a 3-member etcd keeps taking writes when its
 * leader dies and takes the member back; the git forge takes pushes over HTTP, refuses a stale lease, and comes
 * back on the same URL after being down.
 */
describe('cluster harness', () => {
  let dir: string;
  let etcd: EtcdCluster | undefined;
  let forge: GitServer | undefined;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), `${DIR_PREFIX}cluster-`));
  });

  afterAll(async () => {
    // Each stop runs whatever the other does: a failing one must not leave the other's processes behind.
    const stops = await Promise.allSettled([etcd?.stop(), forge?.stop()]);
    await removeTree(dir);
    for (const s of stops) if (s.status === 'rejected') throw s.reason;
  });

  it('etcd: 3 members keep a quorum through the leader being killed, and take it back', async () => {
    etcd = await startEtcd({ members: 3, dir: `${dir}/etcd` });
    const e = etcd;
    expect(e.endpoints).toHaveLength(3);
    expect(new Set(e.members.map((m) => m.pid)).size).toBe(3);

    expect((await e.etcdctl(['put', 'k', 'v1'])).code).toBe(0);
    expect((await e.etcdctl(['get', 'k', '--print-value-only'])).stdout.trim()).toBe('v1');

    const leader = await e.leader();
    await e.kill(leader, 'SIGKILL');
    expect(e.members[leader]!.pid).toBeNull();
    // Two of three are a quorum: once they have elected a new leader (about one election timeout), writes go on.
    await eventually(async () => (await e.etcdctl(['put', 'k', 'v2'])).code === 0, 'a put with the leader gone', 10_000);
    expect(await e.leader()).not.toBe(leader);

    // Back with its data dir and ports: it catches up, and a (linearizable) read through it sees the new value.
    await e.restart(leader);
    expect(e.members[leader]!.pid).not.toBeNull();
    const r = await e.etcdctl(['get', 'k', '--print-value-only'], [e.endpoints[leader]!]);
    expect(r.stdout.trim()).toBe('v2');
    expect((await e.etcdctl(['endpoint', 'health'], e.endpoints)).code).toBe(0);
  });

  it('git forge: push over HTTP, a stale lease refused, fetch by id, down and back on the same port', async () => {
    forge = await startGitServer({ dir: `${dir}/forge` });
    const f = forge;
    await f.createRepo('alice');
    const url = f.url('alice');
    expect(url).toBe(`http://127.0.0.1:${f.port}/alice.git`);

    const work = `${dir}/work`;
    // The test user's own git configuration plays no part; commits get a fixed identity.
    const env = { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@x' };
    const git = async (...args: string[]) => {
      const r = await run('git', args, { cwd: work, env });
      if (r.code !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
      return r.stdout.trim();
    };
    const tryGit = (...args: string[]) => run('git', args, { cwd: work, env });
    const commit = async (file: string) => {
      await fs.writeFile(`${work}/${file}`, file);
      await git('add', file);
      await git('commit', '-qm', file);
      return git('rev-parse', 'HEAD');
    };

    await fs.mkdir(work);
    await git('init', '-q', '-b', 'main');
    await git('remote', 'add', 'origin', url);
    const a = await commit('a');
    await git('push', '-q', 'origin', 'main');
    const b = await commit('b');
    await git('push', '-q', 'origin', 'main');
    expect(await git('ls-remote', url, 'refs/heads/main')).toBe(`${b}\trefs/heads/main`);

    // A host that last saw main at `a` must not overwrite `b`: compare-and-swap on the ref.
    await git('reset', '-q', '--hard', a);
    const c = await commit('c');
    const stale = await tryGit('push', `--force-with-lease=refs/heads/main:${a}`, 'origin', 'HEAD:refs/heads/main');
    expect(stale.code).not.toBe(0);
    expect(stale.stderr).toContain('stale info');
    expect(await git('ls-remote', url, 'refs/heads/main')).toBe(`${b}\trefs/heads/main`);
    await git('push', '-q', `--force-with-lease=refs/heads/main:${b}`, 'origin', 'HEAD:refs/heads/main');
    expect(await git('ls-remote', url, 'refs/heads/main')).toBe(`${c}\trefs/heads/main`);

    // A commit no longer at a ref tip, fetched by its id alone (protocol v2 and v0).
    for (const version of ['2', '0']) {
      const fresh = `${dir}/fetch-v${version}`;
      await run('git', ['init', '-q', fresh], { env });
      const r = await run('git', ['-c', `protocol.version=${version}`, 'fetch', '-q', url, a], { cwd: fresh, env });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect((await run('git', ['cat-file', '-t', a], { cwd: fresh, env })).stdout.trim()).toBe('commit');
    }

    const pid = f.pid;
    await f.stop();
    expect(f.pid).toBeNull();
    await expect(fs.access(`/proc/${pid}`)).rejects.toThrow();
    const down = await tryGit('ls-remote', url);
    expect(down.code).not.toBe(0);
    expect(down.stderr).toMatch(/Failed to connect|Couldn't connect/);

    await f.restart();
    expect(f.pid).not.toBeNull();
    expect(f.url('alice')).toBe(url);
    expect(await git('ls-remote', url, 'refs/heads/main')).toBe(`${c}\trefs/heads/main`);
  });
});
