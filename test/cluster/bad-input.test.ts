import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DIR_PREFIX, isMounted, removeTree, run } from '../helpers.js';
import { freePort, startEtcd, startGitServer, type EtcdCluster, type GitServer } from './harness.js';
import { ClusterHost, type HostOptions } from './hosts.js';
import { Home } from '../../src/home/home.js';

/**
 * A bad `cluster:` block: an unreachable etcd or git server, a wrong key, a duplicate host name, a Home whose
 * server repository is not empty and not this Home's, a setting nasd does not know, YAML that does not parse.
 * Each time nasd exits non-zero within seconds with a message that says what is wrong and what to do, leaves
 * nothing mounted, writes no ref on the git server and leaves no key in etcd. The messages and times are printed.
 */

const PREFIX = '/agent-nas-test';

let dir: string;
let etcd: EtcdCluster;
let git: GitServer;
/** A forge that wants a token (Authorization: Bearer). */
let forge: GitServer;
let closed: number;
let n = 0;
const rows: { case: string; ms: number; code: string; message: string }[] = [];

/** What the git servers and etcd hold: every repository's refs, every key under any prefix. */
async function snapshot(): Promise<{ refs: Record<string, string>; keys: string[] }> {
  const refs: Record<string, string> = {};
  for (const server of [git, forge]) {
    for (const repo of (await fs.readdir(server.root)).sort()) {
      const r = await run('git', ['--git-dir', path.join(server.root, repo), 'for-each-ref', '--format=%(objectname) %(refname)']);
      refs[`${server.port}/${repo}`] = r.stdout;
    }
  }
  const r = await etcd.etcdctl(['get', '', '--prefix', '--keys-only']);
  if (r.code !== 0) throw new Error(`etcdctl get: ${r.stderr}`);
  return { refs, keys: r.stdout.split('\n').filter(Boolean).sort() };
}

/**
 * Start a host with this configuration and expect it refused: a non-zero exit, quickly, nothing mounted,
 * nothing written on the git servers or in etcd. Its message (what nasd printed after "nasd: ").
 */
async function refused(what: string, o: Partial<HostOptions>): Promise<string> {
  const h = new ClusterHost({ name: 'bad', dir: path.join(dir, `case${++n}`), etcd, git, demo: true, ...o });
  const before = await snapshot();
  const started = performance.now();
  const err = await h.start().then(() => null, (e: Error) => e);
  const ms = Math.round(performance.now() - started);
  if (!err) {
    await h.stop();
    throw new Error(`${what}: nasd started`);
  }
  const exit = /^nasd exited with (\S+) before it was ready:\n([\s\S]*)$/.exec(err.message);
  // Not an exit: TestDaemon gave up waiting (and killed it), which is no clear error at start.
  expect(exit, `${what}: ${err.message}`).not.toBeNull();
  const code = exit![1]!;
  const log = exit![2]!;
  const message = log.slice(log.indexOf('nasd: ') + 'nasd: '.length).trim();
  rows.push({ case: what, ms, code, message });
  expect(code).not.toBe('0');
  expect(log).toContain('nasd: ');
  // A UserError's words, not a stack.
  expect(message).not.toMatch(/^\s+at /m);
  expect(await isMounted(path.join(h.dir, 'mnt'))).toBe(false);
  expect(await snapshot()).toEqual(before);
  return message;
}

const gitUrl = (server: GitServer, pattern = '{home}') => `http://127.0.0.1:${server.port}/${pattern}.git`;
const etcdBlock = (changes: Record<string, unknown>) => ({ endpoints: etcd.endpoints, prefix: PREFIX, timeout_ms: 1500, ...changes });

describe('a bad cluster: block: a clear error at start, nothing written anywhere', () => {
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), `${DIR_PREFIX}bad-input-`));
    await fs.chmod(dir, 0o755);
    etcd = await startEtcd({ members: 1, dir: path.join(dir, 'etcd') });
    git = await startGitServer({ dir: path.join(dir, 'git') });
    forge = await startGitServer({ dir: path.join(dir, 'forge'), token: 'the-right-token' });
    closed = await freePort();
    await git.createRepo('demo');
    await forge.createRepo('demo');
    // Another Home's history in alien-demo.git; refs but no main in refs-demo.git.
    const work = path.join(dir, 'work');
    const g = (...args: string[]) => run('git', ['-C', work, '-c', 'user.name=op', '-c', 'user.email=op@x', ...args]);
    await run('git', ['init', '-q', '--initial-branch=main', work]);
    await fs.writeFile(path.join(work, 'README.md'), 'another Home\n');
    for (const step of [['add', '-A'], ['commit', '-qm', 'another Home']]) expect((await g(...step)).code).toBe(0);
    for (const [repo, ref] of [['alien-demo', 'main'], ['refs-demo', 'master'], ['mix-ops', 'main']] as const) {
      await git.createRepo(repo);
      expect((await g('push', '-q', path.join(git.root, `${repo}.git`), `HEAD:refs/heads/${ref}`)).code).toBe(0);
    }
    await git.createRepo('mix-docs');
    await fs.writeFile(path.join(dir, 'wrong-token'), 'not-the-token\n');
    await fs.writeFile(path.join(dir, 'empty-token'), '');
  }, 120_000);

  afterAll(async () => {
    await forge?.stop();
    await git?.stop();
    await etcd?.stop();
    if (dir) await removeTree(dir);
    process.stdout.write(`\nbad cluster: blocks, refused:\n${rows.map((r) => `  ${r.case} (exit ${r.code}, ${r.ms} ms): ${r.message}`).join('\n')}\n`);
  }, 60_000);

  it('etcd unreachable (a closed port): says where it looked and what to check', async () => {
    const m = await refused('etcd unreachable', { override: { etcd: etcdBlock({ endpoints: [`http://127.0.0.1:${closed}`] }) } });
    expect(m).toMatch(new RegExp(`^cluster: cannot reach etcd at http://127\\.0\\.0\\.1:${closed} within 1500 ms \\(.*\\): check cluster\\.etcd\\.endpoints, the TLS files and that etcd runs$`));
  });

  it('an etcd endpoint or prefix with a typo: a configuration error, before anything is asked', async () => {
    const file = (i: number) => path.join(dir, `case${i}`, 'nasd.yaml');
    expect(await refused('etcd endpoint typo', { override: { etcd: etcdBlock({ endpoints: ['http//127.0.0.1:2379'] }) } })).toBe(
      `${file(n)}: cluster.etcd.endpoints: "http//127.0.0.1:2379" is not an etcd client URL: give http(s)://host:port, e.g. https://10.0.0.1:2379`);
    expect(await refused('etcd endpoint without a port', { override: { etcd: etcdBlock({ endpoints: ['http://127.0.0.1'] }) } })).toMatch(/is not an etcd client URL: give http\(s\):\/\/host:port/);
    expect(await refused('etcd prefix typo', { override: { etcd: etcdBlock({ prefix: 'agent-nas-test' }) } })).toBe(
      `${file(n)}: cluster.etcd.prefix "agent-nas-test": a key path such as /agent-nas (no trailing /)`);
    expect(await refused('etcd TLS CA missing', { override: { etcd: etcdBlock({ tls: { ca: path.join(dir, 'nope-ca.pem') } }) } })).toBe(
      `cluster.etcd.tls.ca ${dir}/nope-ca.pem: there is no such file. Give the CA certificate that signed etcd's`);
  });

  it('the git server unreachable: the Home, the URL, git\'s words and what to check', async () => {
    const url = `http://127.0.0.1:${closed}/demo.git`;
    const m = await refused('git server unreachable', { override: { git: { url: `http://127.0.0.1:${closed}/{home}.git`, timeout: '5s' } } });
    expect(m).toMatch(new RegExp(`^Home demo: cannot reach its repository on the git server \\(${url.replace(/\./g, '\\.')}\\): .*(Failed to connect|Couldn't connect).*\\. ` +
      'Check cluster\\.git\\.url, that the server runs, and that the repository exists \\(one empty repository per Home, made on the forge\\)$'));
    expect(m).not.toMatch(/protocol\.allow|core\.askPass/);
  });

  it('a git URL without {home}: a configuration error', async () => {
    const m = await refused('git url without {home}', { override: { git: { url: gitUrl(git, 'demo') } } });
    expect(m).toMatch(/cluster\.git\.url must name where each Home's repository is, with \{home\}: e\.g\. https:\/\/forge\.example\/agents\/\{home\}\.git$/);
  });

  it('a wrong key: missing, for the wrong transport, a token file that is a directory or empty, a token the forge refuses', async () => {
    const ssh = `ssh://git@127.0.0.1:${closed}/{home}.git`;
    expect(await refused('ssh key file missing', { override: { git: { url: ssh, key: path.join(dir, 'id_nope') } } })).toBe(
      `cluster.git.key ${dir}/id_nope: there is no such file. Give the ssh private key this host reaches the git server with`);
    expect(await refused('ssh key with an http url', { override: { git: { url: gitUrl(git), key: path.join(dir, 'wrong-token') } } })).toMatch(
      /cluster\.git\.key is an ssh key, used with an ssh:\/\/ url only; an http:\/\/ url does not use it: give the forge's access token as token_file instead$/);
    expect(await refused('token file a directory', { override: { git: { url: gitUrl(forge), token_file: dir } } })).toBe(
      `cluster.git.token_file ${dir}: it is not a file. Give a file holding the access token this host reaches the git server with`);
    expect(await refused('token file empty', { override: { git: { url: gitUrl(forge), token_file: path.join(dir, 'empty-token') } } })).toBe(
      `cluster.git.token_file ${dir}/empty-token is empty. Give a file holding the access token this host reaches the git server with`);
    const m = await refused('token the forge refuses', { override: { git: { url: gitUrl(forge), token_file: path.join(dir, 'wrong-token') } } });
    expect(m).toMatch(new RegExp(`^Home demo: the git server refused this host's credentials for http://127\\.0\\.0\\.1:${forge.port}/demo\\.git \\(.*Authentication failed.*\\)\\. ` +
      'Check cluster\\.git\\.token_file \\(https\\) or cluster\\.git\\.key \\(ssh\\), and that they may read and push this repository$'));
  });

  it('the right token is taken (the forge that refused the wrong one serves this host)', async () => {
    await fs.writeFile(path.join(dir, 'right-token'), 'the-right-token\n');
    const h = new ClusterHost({ name: 'tokened', dir: path.join(dir, 'tokened'), etcd, git, demo: true,
      override: { git: { url: gitUrl(forge), token_file: path.join(dir, 'right-token') } } });
    try {
      await h.start();
      const main = await run('git', ['--git-dir', path.join(forge.root, 'demo.git'), 'rev-parse', 'main']);
      expect(main.stdout.trim()).toMatch(/^[0-9a-f]{40}$/);
    } finally {
      await h.stop();
      await etcd.etcdctl(['del', `${PREFIX}/`, '--prefix']);
    }
  });

  it('a duplicate host name: refused once the TTL is waited out, the name and the live host in the message', async () => {
    const first = new ClusterHost({ name: 'twin', dir: path.join(dir, 'twin-1'), etcd, git });
    await first.start();
    try {
      const m = await refused('duplicate host name', { name: 'twin', demo: false });
      expect(m).toMatch(new RegExp(`^the host name twin is taken by a live host \\(pid ${first.pid}, started [0-9T:.Z-]+\\): give each host its own cluster\\.host in nasd\\.yaml$`));
      // The first is untouched: still the live host of that name.
      const status = await first.nasJson<{ hosts: { host: string; pid: number }[] }>('cluster', 'status');
      expect(status.hosts.map((h) => [h.host, h.pid])).toEqual([['twin', first.pid]]);
    } finally {
      await first.stop();
    }
  });

  it('a server repository holding another Home\'s history: refused, the server untouched', async () => {
    const m = await refused('server repository holds another history', { override: { git: { url: gitUrl(git, 'alien-{home}') } } });
    expect(m).toMatch(new RegExp(`^Home demo: its repository on the git server \\(http://127\\.0\\.0\\.1:${git.port}/alien-demo\\.git\\) holds another history than this host's Home demo \\(no commit in common\\): not this Home's\\. ` +
      'Give this Home its own repository, or move this host\'s Home away to take the server\'s$'));
  });

  it('two Homes, one refused: the other, whose repository is empty, is not put there either', async () => {
    // docs would go to its empty mix-docs.git; ops's mix-ops.git holds another history. Matched in that order.
    const state = path.join(dir, `case${n + 1}`, 'state');
    await fs.mkdir(state, { recursive: true, mode: 0o700 });
    for (const role of ['docs', 'ops']) await Home.create(state, role, { owner: 'root', identity: { name: 'nasd', email: 'nasd@localhost' } });
    const m = await refused('one of two Homes refused', { demo: false, override: { git: { url: gitUrl(git, 'mix-{home}') } } });
    expect(m).toMatch(/^Home ops: its repository on the git server \(.*\/mix-ops\.git\) holds another history than this host's Home ops/);
    expect((await run('git', ['--git-dir', path.join(git.root, 'mix-docs.git'), 'for-each-ref'])).stdout).toBe('');
  });

  it('a server repository with refs but no main: refused, the refs named', async () => {
    const m = await refused('server repository with refs but no main', { override: { git: { url: gitUrl(git, 'refs-{home}') } } });
    expect(m).toMatch(new RegExp(`^Home demo: its repository on the git server \\(http://127\\.0\\.0\\.1:${git.port}/refs-demo\\.git\\) holds 1 ref\\(s\\) \\(refs/heads/master\\) but no main: ` +
      'not this Home\'s\\. Give this Home an empty repository of its own \\(cluster\\.git\\.url names it with \\{home\\}\\)$'));
  });

  it('settings nasd does not know, in the block and in its parts', async () => {
    expect(await refused('unknown setting', { override: { writers: 3 } })).toMatch(
      /cluster: unknown setting\(s\) writers \(known: host, git, etcd, writer_ttl, batch, push, reconcile, homes\)$/);
    expect(await refused('unknown git setting', { override: { git: { url: gitUrl(git), token: 'x' } } })).toMatch(
      /cluster\.git: unknown setting\(s\) token \(known: url, key, token_file, timeout\)$/);
  });

  it('malformed YAML: the file and the line', async () => {
    const raw = `cluster:\n  host: bad\n  git: { url: "http://127.0.0.1:${git.port}/{home}.git"\n  etcd: { endpoints: [${etcd.endpoints[0]}] }\n`;
    const m = await refused('malformed YAML', { raw });
    expect(m).toMatch(new RegExp(`^cannot read ${dir}/case${n}/nasd\\.yaml \\(line \\d+\\): `));
  });
});
