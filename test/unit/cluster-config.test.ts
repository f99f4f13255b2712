import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { checkClusterFiles, parseCluster, repoUrl, type ClusterConfig } from '../../src/cluster/config.js';

/** nasd.yaml's cluster: block (src/cluster/config.ts): what it takes, and what it refuses with which words. */

const FILE = '/etc/agent-nas/nasd.yaml';
const good = () => ({
  host: 'nas-a',
  git: { url: 'https://forge.example/agents/{home}.git' },
  etcd: { endpoints: ['https://10.0.0.1:2379', 'https://10.0.0.2:2379/'] },
});
/** The block with one setting changed (undefined: removed), at a dotted path. */
function with_(changes: Record<string, unknown>): Record<string, unknown> {
  const doc = structuredClone(good()) as Record<string, any>;
  for (const [key, value] of Object.entries(changes)) {
    const parts = key.split('.');
    let at = doc;
    for (const p of parts.slice(0, -1)) at = at[p] ??= {};
    if (value === undefined) delete at[parts.at(-1)!];
    else at[parts.at(-1)!] = value;
  }
  return doc;
}
const refusal = (raw: unknown): string => {
  try {
    parseCluster(raw, FILE);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('accepted');
};

describe('the cluster: block (parseCluster)', () => {
  it('no block: one host, nasd unchanged', () => {
    expect(parseCluster(undefined, FILE)).toBeNull();
    expect(parseCluster(null, FILE)).toBeNull();
  });

  it('the defaults, and what is given', () => {
    const c = parseCluster(good(), FILE)!;
    expect(c).toEqual({
      host: 'nas-a',
      git: { url: 'https://forge.example/agents/{home}.git', timeout_ms: 30_000 },
      etcd: { endpoints: ['https://10.0.0.1:2379', 'https://10.0.0.2:2379'], prefix: '/agent-nas', timeout_ms: 2000 },
      writer_ttl_s: 10, batch: 16, push: 'propose', reconcile_s: 30, homes: 'all',
    } satisfies ClusterConfig);
    expect(repoUrl(c, 'ops')).toBe('https://forge.example/agents/ops.git');
    const full = parseCluster(with_({
      'git.token_file': '/etc/agent-nas/git-token', 'git.timeout': '5s', 'etcd.prefix': '/nas/prod', 'etcd.timeout_ms': 500,
      'etcd.tls': { ca: '/etc/ca.pem', cert: '/etc/c.pem', key: '/etc/k.pem' }, writer_ttl: '4s', batch: 8, push: 'commit', reconcile: '1m', homes: ['demo', 'ops'],
    }), FILE)!;
    expect(full.git).toEqual({ url: 'https://forge.example/agents/{home}.git', token_file: '/etc/agent-nas/git-token', timeout_ms: 5000 });
    expect(full.etcd).toMatchObject({ prefix: '/nas/prod', timeout_ms: 500, tls: { ca: '/etc/ca.pem', cert: '/etc/c.pem', key: '/etc/k.pem' } });
    expect([full.writer_ttl_s, full.batch, full.push, full.reconcile_s, full.homes]).toEqual([4, 8, 'commit', 60, ['demo', 'ops']]);
    // An ssh forge with its key; a lab's absolute path; an IPv6 etcd member.
    expect(parseCluster(with_({ 'git.url': 'ssh://git@forge/agents/{home}.git', 'git.key': '/etc/agent-nas/id_ed25519' }), FILE)!.git.key).toBe('/etc/agent-nas/id_ed25519');
    expect(parseCluster(with_({ 'git.url': '/srv/git/{home}.git' }), FILE)!.git.url).toBe('/srv/git/{home}.git');
    expect(parseCluster(with_({ 'etcd.endpoints': ['http://[::1]:2379'] }), FILE)!.etcd.endpoints).toEqual(['http://[::1]:2379']);
  });

  it('names the setting and what to give', () => {
    expect(refusal('nas-a')).toBe(`${FILE}: cluster must be a mapping`);
    expect(refusal(with_({ bogus: 1, other: 2 }))).toBe(`${FILE}: cluster: unknown setting(s) bogus, other (known: host, git, etcd, writer_ttl, batch, push, reconcile, homes)`);
    expect(refusal(with_({ 'git.user': 'x' }))).toMatch(/cluster\.git: unknown setting\(s\) user \(known: url, key, token_file, timeout\)/);
    expect(refusal(with_({ 'etcd.tls': { ca: '/ca', crt: '/c' } }))).toMatch(/cluster\.etcd\.tls: unknown setting\(s\) crt/);
    expect(refusal(with_({ host: undefined }))).toMatch(/cluster\.host must be a non-empty string/);
    expect(refusal(with_({ host: 'Nas_A' }))).toMatch(/cluster\.host "Nas_A": use lower-case letters, digits and dashes \(at most 63\), e.g\. nas-a/);
    expect(refusal(with_({ git: undefined }))).toMatch(/cluster\.git must be a mapping/);
    expect(refusal(with_({ 'git.url': 'https://forge.example/agents/demo.git' }))).toMatch(/cluster\.git\.url must name where each Home's repository is, with \{home\}: e\.g\. https:/);
    expect(refusal(with_({ 'git.url': 'forge.example:agents/{home}.git' }))).toMatch(/cluster\.git\.url "forge\.example:agents\/\{home\}\.git": give an http\(s\):\/\/, ssh:\/\/ or git:\/\/ URL/);
    expect(refusal(with_({ 'git.url': 'https://forge/{home} x.git' }))).toMatch(/give an http\(s\):\/\//);
    expect(refusal(with_({ 'git.key': 'id_ed25519', 'git.url': 'ssh://forge/{home}.git' }))).toMatch(/cluster\.git\.key must be an absolute path/);
    expect(refusal(with_({ 'git.timeout': 'soon' }))).toBe(`${FILE}: cluster.git.timeout: invalid duration "soon": use a number and a unit, e.g. 90s, 30m, 48h, 7d, 2w`);
    expect(refusal(with_({ 'git.timeout': '0s' }))).toBe(`${FILE}: cluster.git.timeout: duration "0s" must be positive`);
    expect(refusal(with_({ reconcile: '500ms' }))).toMatch(/cluster\.reconcile: invalid duration "500ms"/);
  });

  it('a credential the url does not use is refused, with the one it takes', () => {
    expect(refusal(with_({ 'git.key': '/etc/agent-nas/id_ed25519' }))).toMatch(
      /cluster\.git\.key is an ssh key, used with an ssh:\/\/ url only; an https:\/\/ url does not use it: give the forge's access token as token_file instead/);
    expect(refusal(with_({ 'git.url': 'ssh://forge/{home}.git', 'git.token_file': '/etc/t' }))).toMatch(
      /cluster\.git\.token_file is an https access token, used with an http\(s\):\/\/ url only; an ssh:\/\/ url does not use it: give the ssh key as key instead/);
    expect(refusal(with_({ 'git.url': '/srv/{home}.git', 'git.key': '/k' }))).toMatch(/a path does not use it$/);
    expect(refusal(with_({ 'git.url': 'git://forge/{home}.git', 'git.token_file': '/t' }))).toMatch(/a git:\/\/ url does not use it$/);
  });

  it('etcd: endpoints as client URLs with a port, a key-path prefix, TLS cert and key together', () => {
    expect(refusal(with_({ 'etcd.endpoints': [] }))).toMatch(/cluster\.etcd\.endpoints must list the etcd members' client URLs, e\.g\. \[https:\/\/10\.0\.0\.1:2379\]/);
    expect(refusal(with_({ 'etcd.endpoints': 'https://10.0.0.1:2379' }))).toMatch(/must list/);
    for (const typo of ['http//127.0.0.1:2379', '127.0.0.1:2379', 'https://10.0.0.1', 'https://10.0.0.1:2379/v3', 'htp://10.0.0.1:2379', 'https://10.0.0.1:23x9']) {
      expect(refusal(with_({ 'etcd.endpoints': [typo] }))).toBe(
        `${FILE}: cluster.etcd.endpoints: ${JSON.stringify(typo)} is not an etcd client URL: give http(s)://host:port, e.g. https://10.0.0.1:2379`);
    }
    for (const typo of ['agent-nas', '/agent-nas/', '/agent nas']) {
      expect(refusal(with_({ 'etcd.prefix': typo }))).toMatch(/cluster\.etcd\.prefix .*: a key path such as \/agent-nas \(no trailing \/\)/);
    }
    expect(refusal(with_({ 'etcd.timeout_ms': 50 }))).toMatch(/cluster\.etcd\.timeout_ms must be a whole number from 100 to 60000/);
    expect(refusal(with_({ 'etcd.tls': { ca: '/ca', cert: '/c' } }))).toMatch(/cluster\.etcd\.tls: give cert and key together/);
    expect(refusal(with_({ 'etcd.tls': { cert: '/c', key: '/k' } }))).toMatch(/cluster\.etcd\.tls\.ca must be a non-empty string/);
  });

  it('the rest: writer_ttl, batch, push, homes', () => {
    expect(refusal(with_({ writer_ttl: '1s' }))).toMatch(/cluster\.writer_ttl must be at least 2s/);
    expect(refusal(with_({ batch: 0 }))).toMatch(/cluster\.batch must be a whole number from 1 to 60/);
    expect(refusal(with_({ batch: 61 }))).toMatch(/from 1 to 60/);
    expect(refusal(with_({ push: 'always' }))).toMatch(/cluster\.push must be "propose" .* or "commit"/);
    expect(refusal(with_({ homes: [] }))).toMatch(/cluster\.homes must list the Homes this host serves \(e\.g\. \[demo\]\) or be "all"/);
    expect(refusal(with_({ homes: 'demo' }))).toMatch(/cluster\.homes must list/);
    expect(refusal(with_({ homes: ['Bad Name'] }))).toMatch(/invalid role name/);
  });
});

describe('the files the block names (checkClusterFiles, at start)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-cluster-config-'));
    await fs.writeFile(path.join(dir, 'token'), 'secret\n');
    await fs.writeFile(path.join(dir, 'empty'), '');
    await fs.writeFile(path.join(dir, 'id_ed25519'), 'key\n');
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });
  const config = (git: Record<string, string>, tls?: Record<string, string>): ClusterConfig =>
    parseCluster(with_({ ...Object.fromEntries(Object.entries(git).map(([k, v]) => [`git.${k}`, v])), ...(tls ? { 'etcd.tls': tls } : {}) }), FILE)!;
  const refused = async (c: ClusterConfig): Promise<string> => checkClusterFiles(c).then(() => 'accepted', (err: Error) => err.message);

  it('takes files nasd can read', async () => {
    expect(await refused(config({ token_file: path.join(dir, 'token') }))).toBe('accepted');
    expect(await refused(config({ url: 'ssh://forge/{home}.git', key: path.join(dir, 'id_ed25519') }))).toBe('accepted');
    expect(await refused(config({}))).toBe('accepted');
  });

  it('a missing key, a token file that is a directory or empty, a missing CA: named, with what to give', async () => {
    expect(await refused(config({ url: 'ssh://forge/{home}.git', key: path.join(dir, 'nope') }))).toBe(
      `cluster.git.key ${dir}/nope: there is no such file. Give the ssh private key this host reaches the git server with`);
    expect(await refused(config({ token_file: dir }))).toBe(
      `cluster.git.token_file ${dir}: it is not a file. Give a file holding the access token this host reaches the git server with`);
    expect(await refused(config({ token_file: path.join(dir, 'empty') }))).toMatch(/cluster\.git\.token_file .*empty is empty\. Give a file holding the access token/);
    expect(await refused(config({}, { ca: path.join(dir, 'ca.pem') }))).toMatch(/cluster\.etcd\.tls\.ca .*ca\.pem: there is no such file\. Give the CA certificate/);
    expect(await refused(config({}, { ca: path.join(dir, 'token'), cert: path.join(dir, 'token'), key: path.join(dir, 'k.pem') }))).toMatch(/cluster\.etcd\.tls\.key .*k\.pem: there is no such file\. Give the private key of that certificate/);
  });
});
