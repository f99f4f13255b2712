import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { TestDaemon, eventually, run, type RunResult } from '../helpers.js';

/**
 * Outside effects go through a lease's egress scope (B34, issue 31 item 7): a run without it is in a network
 * namespace with loopback only, one with it (`nas run --egress`) has the host's network; every run's PR records
 * which, and main's policy can make a PR of a run with egress wait for a person. Real namespaces, a real listener.
 */
const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

/** Run as the run's user: its own server on loopback, then the test's listener on the host's 127.0.0.1. */
const PROBE = `const net = require('node:net');
const say = (line) => process.stdout.write(line + '\\n');
const connect = (port, label, then) => {
  const c = net.connect(port, '127.0.0.1');
  c.on('connect', () => { c.end(); say(label + ' connected'); then(); }).on('error', (e) => { say(label + ' ' + e.code); then(); });
};
const own = net.createServer((s) => s.end()).listen(0, '127.0.0.1', () =>
  connect(own.address().port, 'own', () => connect(Number(process.argv[2]), 'host', () => own.close())));
`;

interface RunOut {
  run: string;
  egress: boolean | null;
  pr: { id: number; state: string; reasons: string[] } | null;
}

interface PrJson {
  state: string;
  reasons: string[];
  provenance: { run?: string; egress?: boolean };
  merged?: { commit: string };
}

describe('a run and the network: the lease scope egress', () => {
  let d: TestDaemon;
  let shared: string;
  let listener: net.Server;
  let port = 0;
  let accepted = 0;
  const env = () => ({ NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' });
  const nasRun = (...args: string[]): Promise<RunResult> => run(process.execPath, [CLI, '--socket', d.socket, 'run', ...args], { env: env() });
  /** A run that probes the network and writes one file, proposed with an intent; what it saw is in shared/<name>.*. */
  const probeRun = async (name: string, ...flags: string[]): Promise<{ out: RunOut; stderr: string; seen: string; links: string[]; sysNet: string[] }> => {
    const r = await nasRun('--json', 'demo', '--user', 'nobody', '--intent', `probe ${name}`, ...flags, '--', 'sh', '-c',
      `${process.execPath} ${shared}/probe.cjs ${port} > ${shared}/${name}.seen 2>&1; ` +
      `ip -o link | cut -d: -f2 | tr -d ' ' > ${shared}/${name}.links; ls /sys/class/net > ${shared}/${name}.sys; ` +
      `ls -A /run/user /run/dbus > ${shared}/${name}.run 2>&1; ` +
      `echo ${name} > outbox/${name}.md`);
    expect(r.code, r.stderr).toBe(0);
    const lines = async (ext: string) => (await fs.readFile(`${shared}/${name}.${ext}`, 'utf8')).split('\n').filter(Boolean).map((l) => l.replace(/@.*$/, ''));
    return { out: JSON.parse(r.stdout), stderr: r.stderr, seen: await fs.readFile(`${shared}/${name}.seen`, 'utf8'), links: await lines('links'), sysNet: await lines('sys') };
  };
  const prOf = (out: RunOut) => d.nasJson<PrJson>('pr', 'show', 'demo', String(out.pr!.id));

  beforeAll(async () => {
    listener = net.createServer((s) => {
      accepted++;
      s.end();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    port = (listener.address() as net.AddressInfo).port;
    d = await TestDaemon.withBranch('draft');
    shared = `${d.dir}/shared`;
    await fs.mkdir(shared);
    await fs.chmod(shared, 0o1777);
    await fs.writeFile(`${shared}/probe.cjs`, PROBE, { mode: 0o644 });
  });
  afterAll(async () => {
    await d?.cleanup();
    await new Promise((resolve) => listener?.close(resolve));
  });

  it('gives a run without egress loopback only: its own servers work, the host\'s 127.0.0.1 is refused; its PR records no egress', async () => {
    const before = accepted;
    const { out, seen, links, sysNet } = await probeRun('closed');
    expect(seen).toBe('own connected\nhost ECONNREFUSED\n');
    expect(accepted).toBe(before);
    expect(links).toEqual(['lo']);
    expect(sysNet).toEqual(['lo']);
    // The host's service sockets reached by path (the user's systemd and session bus, the system bus) are hidden.
    expect(await fs.readFile(`${shared}/closed.run`, 'utf8')).toBe('/run/dbus:\n\n/run/user:\n');
    expect(out.egress).toBe(false);
    // Only recorded: the default policy merges it.
    expect(out.pr).toMatchObject({ state: 'merged' });
    const pr = await prOf(out);
    expect(pr.provenance).toMatchObject({ run: out.run, egress: false });
    expect((await d.nas('pr', 'show', 'demo', String(out.pr!.id))).stdout).toMatch(/^run egress: no \(loopback only/m);
    expect((await d.git('log', '-1', '--format=%B', pr.merged!.commit)).stdout).toContain('Nas-Egress: no');
    // The run's lease had no egress scope.
    const leases = await d.nasJson<{ branch: string; scopes: string[] }[]>('lease', 'list', 'demo');
    expect(leases.find((l) => l.branch === `run-${out.run}`)?.scopes).toEqual(['propose:main', 'write']);
  });

  it('gives a run with --egress the host\'s network and its lease the egress scope; without a policy rule it is only recorded', async () => {
    const before = accepted;
    const { out, seen, links, sysNet } = await probeRun('open', '--egress');
    expect(seen).toBe('own connected\nhost connected\n');
    expect(accepted).toBe(before + 1);
    const hostNet = (await fs.readdir('/sys/class/net')).sort();
    expect(sysNet.sort()).toEqual(hostNet);
    expect(links.sort()).toEqual(hostNet);
    expect(out.egress).toBe(true);
    expect(out.pr).toMatchObject({ state: 'merged' });
    const pr = await prOf(out);
    expect(pr.provenance).toMatchObject({ run: out.run, egress: true });
    expect((await d.nas('pr', 'show', 'demo', String(out.pr!.id))).stdout).toMatch(/^run egress: yes \(lease scope egress/m);
    expect((await d.git('log', '-1', '--format=%B', pr.merged!.commit)).stdout).toContain('Nas-Egress: yes');
    const leases = await d.nasJson<{ branch: string; scopes: string[] }[]>('lease', 'list', 'demo');
    expect(leases.find((l) => l.branch === `run-${out.run}`)?.scopes).toEqual(['egress', 'propose:main', 'write']);
  });

  it('with merge.egress: person in main\'s policy, an egress run\'s PR waits for a person, with the reason; a run without egress still merges', async () => {
    const policy = await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8');
    await d.pushToMain({ '.nas/policy.yaml': `${policy}merge:\n  egress: person\n` }, 'owner: runs with egress wait for a person');
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8')).includes('egress: person'), 'main to follow the push');
    const gated = await probeRun('gated', '--egress');
    const reason = 'the run had network egress (lease scope egress): a person decides';
    expect(gated.out.pr).toMatchObject({ state: 'waiting', reasons: [reason] });
    expect(gated.stderr).toContain(`waiting at the Human Gate (${reason})`);
    expect(await prOf(gated.out)).toMatchObject({ state: 'waiting', reasons: [reason], provenance: { egress: true } });
    const inbox = await d.nasJson<{ id: number; reasons: string[] }[]>('pr', 'inbox');
    expect(inbox.find((x) => x.id === gated.out.pr!.id)?.reasons).toEqual([reason]);
    const plain = await probeRun('plain');
    expect(plain.out.pr).toMatchObject({ state: 'merged' });
    // The owner decides: approved, it merges.
    expect((await d.nas('pr', 'approve', 'demo', String(gated.out.pr!.id))).code).toBe(0);
    expect((await d.gitBlob('main:outbox/gated.md')).toString()).toBe('gated\n');
  });

  it('lets the owner issue a lease with egress, and refuses a scope it does not know', async () => {
    const ok = await d.nas('lease', 'issue', 'demo/draft', '--principal', 'nobody', '--ttl', '1h', '--scopes', 'write,egress');
    expect(ok.code, ok.stderr).toBe(0);
    const token = ok.stdout.trim();
    const leases = await d.nasJson<{ branch: string; scopes: string[]; status: string }[]>('lease', 'list', 'demo');
    expect(leases.filter((l) => l.branch === 'draft' && l.status === 'active').map((l) => l.scopes)).toEqual([['egress', 'write']]);
    // A sub-lease of a lease without egress cannot have it.
    const narrow = await d.nas('lease', 'issue', 'demo/draft', '--principal', 'nobody', '--ttl', '1h', '--scopes', 'write');
    const sub = await run(process.execPath, [CLI, '--socket', d.socket, 'lease', 'issue', 'demo/draft', '--principal', 'nobody', '--ttl', '30m', '--scopes', 'write,egress'],
      { env: { ...env(), NAS_OWNER_TOKEN_FILE: `${d.dir}/no-owner-token`, NAS_LEASE: narrow.stdout.trim() } });
    expect(sub.code).not.toBe(0);
    expect(sub.stderr).toMatch(/asks for egress, which the parent does not have/);
    const bad = await d.nas('lease', 'issue', 'demo/draft', '--principal', 'nobody', '--scopes', 'write,network');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/unknown scope "network": scopes are write, propose:<target> and egress/);
    expect(token).toMatch(/^nas1\./);
  });
});
