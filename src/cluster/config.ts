import fs from 'node:fs/promises';
import { UserError } from '../util/errors.js';
import { parseDuration } from '../util/duration.js';
import { validateRole } from '../util/names.js';

/**
 * nasd.yaml's `cluster:` block: this host's part in several hosts serving the same Homes (src/cluster). Without
 * the block nasd is the one-host product, unchanged.
 *
 * cluster:
 *   host: nas-a                                  # unique among the live hosts
 *   git: { url: "https://forge/agents/{home}.git", token_file: /etc/agent-nas/git-token, timeout: 30s }
 *                                                # an ssh:// url takes key: /etc/agent-nas/id_ed25519 instead
 *   etcd: { endpoints: ["https://10.0.0.1:2379"], prefix: /agent-nas, timeout_ms: 2000, tls: { ca, cert, key } }
 *   writer_ttl: 10s        # a merge writer that stops answering loses its Homes after this
 *   batch: 16              # proposals merged per push of main
 *   push: propose          # when a branch's head goes to the git server: propose, or every commit
 *   reconcile: 30s         # how often main is compared with the server's, whatever etcd said
 *   homes: [demo, ops]     # the Homes this host serves ("all": every Home in its state directory)
 */

export interface ClusterConfig {
  host: string;
  git: { url: string; key?: string; token_file?: string; timeout_ms: number };
  etcd: { endpoints: string[]; prefix: string; timeout_ms: number; tls?: { ca: string; cert?: string; key?: string } };
  writer_ttl_s: number;
  batch: number;
  push: 'propose' | 'commit';
  reconcile_s: number;
  homes: string[] | 'all';
}

const HOST = /^[a-z0-9][a-z0-9-]{0,62}$/;
const KEYS = ['host', 'git', 'etcd', 'writer_ttl', 'batch', 'push', 'reconcile', 'homes'];

type Doc = Record<string, unknown>;

function mapping(v: unknown, where: string): Doc {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new UserError(`${where} must be a mapping`);
  return v as Doc;
}

function text(v: unknown, where: string): string {
  if (typeof v !== 'string' || v.trim() === '') throw new UserError(`${where} must be a non-empty string`);
  return v.trim();
}

function absolute(v: unknown, where: string): string {
  const p = text(v, where);
  if (!p.startsWith('/')) throw new UserError(`${where} must be an absolute path`);
  return p;
}

function unknownKeys(doc: Doc, known: string[], where: string): void {
  const extra = Object.keys(doc).filter((k) => !known.includes(k));
  if (extra.length > 0) throw new UserError(`${where}: unknown setting(s) ${extra.join(', ')} (known: ${known.join(', ')})`);
}

/** A whole number from min to max, dflt when not given. */
function wholeNumber(v: unknown, where: string, dflt: number, min: number, max: number): number {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || (v as number) < min || (v as number) > max) throw new UserError(`${where} must be a whole number from ${min} to ${max}`);
  return v as number;
}

/** A duration (`30s`, `1m`) in seconds, at least min; dflt when not given. */
function seconds(v: unknown, where: string, dflt: number, min: number): number {
  if (v === undefined) return dflt;
  let s: number;
  try {
    s = parseDuration(String(v));
  } catch (err) {
    throw new UserError(`${where}: ${(err as Error).message}`);
  }
  if (s < min) throw new UserError(`${where} must be at least ${min}s`);
  return s;
}

/** The `cluster:` block as nasd uses it, or a UserError that names the setting and what to give. */
export function parseCluster(raw: unknown, file: string): ClusterConfig | null {
  if (raw === null || raw === undefined) return null;
  const at = `${file}: cluster`;
  const doc = mapping(raw, at);
  unknownKeys(doc, KEYS, at);
  const host = text(doc.host, `${at}.host`);
  if (!HOST.test(host)) throw new UserError(`${at}.host ${JSON.stringify(host)}: use lower-case letters, digits and dashes (at most 63), e.g. nas-a`);
  const git = parseGit(doc.git, `${at}.git`);
  const etcd = parseEtcd(doc.etcd, `${at}.etcd`);
  const push = doc.push ?? 'propose';
  if (push !== 'propose' && push !== 'commit') throw new UserError(`${at}.push must be "propose" (a branch goes to the git server when it is proposed) or "commit" (every branch that took commits, at each reconcile pass)`);
  let homes: string[] | 'all';
  if (doc.homes === undefined || doc.homes === 'all') homes = 'all';
  else if (Array.isArray(doc.homes) && doc.homes.length > 0) homes = doc.homes.map((h) => validateRole(String(h)));
  else throw new UserError(`${at}.homes must list the Homes this host serves (e.g. [demo]) or be "all"`);
  return {
    host,
    git,
    etcd,
    writer_ttl_s: seconds(doc.writer_ttl, `${at}.writer_ttl`, 10, 2),
    // A batch and its decisions are one etcd transaction each: within etcd's 128 operations.
    batch: wholeNumber(doc.batch, `${at}.batch`, 16, 1, 60),
    push,
    reconcile_s: seconds(doc.reconcile, `${at}.reconcile`, 30, 1),
    homes,
  };
}

/** `cluster.git` (`at`: its name in errors): where each Home's repository is, and the credential its url's transport uses. */
function parseGit(raw: unknown, at: string): ClusterConfig['git'] {
  const git = mapping(raw, at);
  unknownKeys(git, ['url', 'key', 'token_file', 'timeout'], at);
  const url = text(git.url, `${at}.url`);
  if (!url.includes('{home}')) throw new UserError(`${at}.url must name where each Home's repository is, with {home}: e.g. https://forge.example/agents/{home}.git`);
  if (!/^(https?|ssh|git):\/\/[^-\s]|^\//.test(url) || /[\x00-\x20\x7f]/.test(url)) {
    throw new UserError(`${at}.url ${JSON.stringify(url)}: give an http(s)://, ssh:// or git:// URL (or an absolute path, for a lab)`);
  }
  // Each credential goes with its transport: one the url does not use would be ignored, and every call refused.
  const scheme = /^([a-z]+):\/\//.exec(url)?.[1] ?? 'path';
  const kind = scheme === 'path' ? 'a path' : `${scheme === 'git' ? 'a' : 'an'} ${scheme}:// url`;
  if (git.key !== undefined && scheme !== 'ssh') {
    throw new UserError(`${at}.key is an ssh key, used with an ssh:// url only; ${kind} does not use it${scheme.startsWith('http') ? ': give the forge\'s access token as token_file instead' : ''}`);
  }
  if (git.token_file !== undefined && scheme !== 'http' && scheme !== 'https') {
    throw new UserError(`${at}.token_file is an https access token, used with an http(s):// url only; ${kind} does not use it${scheme === 'ssh' ? ': give the ssh key as key instead' : ''}`);
  }
  return {
    url,
    ...(git.key !== undefined ? { key: absolute(git.key, `${at}.key`) } : {}),
    ...(git.token_file !== undefined ? { token_file: absolute(git.token_file, `${at}.token_file`) } : {}),
    timeout_ms: seconds(git.timeout, `${at}.timeout`, 30, 1) * 1000,
  };
}

/** `cluster.etcd` (`at`: its name in errors): the members, the key prefix, the timeout, and TLS. */
function parseEtcd(raw: unknown, at: string): ClusterConfig['etcd'] {
  const etcd = mapping(raw, at);
  unknownKeys(etcd, ['endpoints', 'prefix', 'timeout_ms', 'tls'], at);
  const endpoints = etcd.endpoints;
  if (!Array.isArray(endpoints) || endpoints.length === 0) throw new UserError(`${at}.endpoints must list the etcd members' client URLs, e.g. [https://10.0.0.1:2379]`);
  for (const e of endpoints) {
    if (typeof e !== 'string' || !/^https?:\/\/(\[[0-9A-Fa-f:.]+\]|[^\s/:[\]]+):\d+$/.test(e.replace(/\/$/, ''))) {
      throw new UserError(`${at}.endpoints: ${JSON.stringify(e)} is not an etcd client URL: give http(s)://host:port, e.g. https://10.0.0.1:2379`);
    }
  }
  const prefix = etcd.prefix === undefined ? '/agent-nas' : text(etcd.prefix, `${at}.prefix`);
  if (!/^\/[A-Za-z0-9_./-]*$/.test(prefix) || prefix.endsWith('/')) throw new UserError(`${at}.prefix ${JSON.stringify(prefix)}: a key path such as /agent-nas (no trailing /)`);
  const tls = etcd.tls === undefined ? undefined : mapping(etcd.tls, `${at}.tls`);
  if (tls) unknownKeys(tls, ['ca', 'cert', 'key'], `${at}.tls`);
  if (tls && (tls.cert === undefined) !== (tls.key === undefined)) throw new UserError(`${at}.tls: give cert and key together (a client certificate), or neither`);
  return {
    endpoints: endpoints.map((e) => String(e).replace(/\/$/, '')),
    prefix,
    timeout_ms: wholeNumber(etcd.timeout_ms, `${at}.timeout_ms`, 2000, 100, 60_000),
    ...(tls ? {
      tls: {
        ca: absolute(tls.ca, `${at}.tls.ca`),
        ...(tls.cert !== undefined ? { cert: absolute(tls.cert, `${at}.tls.cert`), key: absolute(tls.key, `${at}.tls.key`) } : {}),
      },
    } : {}),
  };
}

/**
 * The files the block names (the git key or token, etcd's TLS files): each must be a file nasd can read, a token
 * not empty. Checked when nasd starts, before etcd or the git server is asked anything.
 */
export async function checkClusterFiles(c: ClusterConfig): Promise<void> {
  const files: [string, string | undefined, string][] = [
    ['git.key', c.git.key, 'the ssh private key this host reaches the git server with'],
    ['git.token_file', c.git.token_file, 'a file holding the access token this host reaches the git server with'],
    ['etcd.tls.ca', c.etcd.tls?.ca, 'the CA certificate that signed etcd\'s'],
    ['etcd.tls.cert', c.etcd.tls?.cert, 'this host\'s client certificate for etcd'],
    ['etcd.tls.key', c.etcd.tls?.key, 'the private key of that certificate'],
  ];
  for (const [setting, file, what] of files) {
    if (file === undefined) continue;
    let size: number;
    try {
      const handle = await fs.open(file, 'r');
      try {
        const st = await handle.stat();
        if (!st.isFile()) throw Object.assign(new Error('not a file'), { code: 'EISDIR' });
        size = st.size;
      } finally {
        await handle.close();
      }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const why = code === 'ENOENT' ? 'there is no such file' : code === 'EISDIR' ? 'it is not a file' : code === 'EACCES' ? 'nasd may not read it' : (err as Error).message;
      throw new UserError(`cluster.${setting} ${file}: ${why}. Give ${what}`);
    }
    if (setting === 'git.token_file' && size === 0) throw new UserError(`cluster.git.token_file ${file} is empty. Give ${what}`);
  }
}

/** Where a Home's repository is on the git server. */
export const repoUrl = (c: ClusterConfig, home: string): string => c.git.url.replaceAll('{home}', home);
