import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TestDaemon, removeTree, run } from '../helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const BROKER = `${ROOT}/libexec/nas-mount-broker`;
const RELAY = `${ROOT}/libexec/nas-mount-relay`;

/** Mounts of the test's (the host's) mount namespace at or below dir: target -> type and per-mount options. */
async function hostMounts(dir: string): Promise<Map<string, { type: string; options: string[] }>> {
  const out = new Map<string, { type: string; options: string[] }>();
  for (const line of (await fs.readFile('/proc/self/mountinfo', 'utf8')).split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    if (dash > 0 && (fields[4] === dir || fields[4]?.startsWith(`${dir}/`))) out.set(fields[4], { type: fields[dash + 1], options: fields[5].split(',') });
  }
  return out;
}

/**
 * The hardened unit's arrangement, without systemd (there is none here): nasd in a mount namespace of its own
 * (a slave of the host's, as systemd makes it for ProtectSystem= and the rest) and without CAP_SYS_ADMIN, so
 * a mount it made itself would be seen by no one else; nas-mount-broker, outside, makes its mounts where the
 * host sees them. The test's directory is a shared mount, as / is on a systemd host, so they propagate back in.
 */
describe('nasd sandboxed, its mounts made by nas-mount-broker', () => {
  let base: string;
  let d: TestDaemon;
  let broker: ChildProcess;
  let brokerLog = '';
  const relay = (args: string[], uid = 0) =>
    run('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', RELAY, ...args], { env: { NAS_MOUNT_BROKER: `${base}/broker.sock` } });

  beforeAll(async () => {
    base = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-test-sandbox-'));
    await fs.chmod(base, 0o755);
    expect((await run('mount', ['--bind', base, base])).code).toBe(0);
    expect((await run('mount', ['--make-shared', base])).code).toBe(0);
    broker = spawn('python3', [BROKER, '--socket', `${base}/broker.sock`, '--mount', `${base}/mnt`, '--state-dir', `${base}/state`], { stdio: ['ignore', 'pipe', 'pipe'] });
    broker.stdout!.on('data', (c) => (brokerLog += c));
    broker.stderr!.on('data', (c) => (brokerLog += c));
    for (let i = 0; i < 100 && !brokerLog.includes('nas-mount-broker ready'); i++) await new Promise((r) => setTimeout(r, 50));
    expect(brokerLog).toContain('nas-mount-broker ready');
    d = await TestDaemon.start({ dir: base, sandboxBroker: `${base}/broker.sock`, extraArgs: ['--demo'] });
  });

  afterAll(async () => {
    await d?.stop();
    if (broker?.pid && broker.exitCode === null) {
      const gone = new Promise((r) => broker.once('exit', r));
      process.kill(broker.pid, 'SIGTERM');
      await gone;
    }
    if (base) {
      for (const target of [...(await hostMounts(base)).keys()].reverse()) await run('umount', ['-l', target]);
      await removeTree(base);
    }
  });

  it('serves from a namespace of its own without CAP_SYS_ADMIN; the host sees the mount, commits and scratch binds', async () => {
    const pid = d.child.pid!;
    expect(await fs.readlink(`/proc/${pid}/ns/mnt`)).not.toBe(await fs.readlink('/proc/self/ns/mnt'));
    const capEff = BigInt(`0x${/^CapEff:\s*([0-9a-f]+)$/m.exec(await fs.readFile(`/proc/${pid}/status`, 'utf8'))![1]}`);
    expect(capEff & (1n << 21n)).toBe(0n); // CAP_SYS_ADMIN

    const fuse = (await hostMounts(base)).get(d.mnt);
    expect(fuse?.type).toBe('fuse.nasd');
    expect(fuse?.options).toEqual(expect.arrayContaining(['nosuid', 'nodev']));
    expect(await fs.readFile(d.path('demo', 'AGENTS.md'), 'utf8')).toMatch(/\S/);
    expect((await d.nas('branch', 'create', 'demo/sb')).code).toBe(0);
    await fs.writeFile(d.path('demo@sb', 'outbox/from-host.md'), 'hello\n');
    await d.sync('demo/sb');
    expect((await d.git('log', '-1', '--format=%s', 'refs/heads/sb')).stdout).toMatch(/outbox\/from-host\.md/);

    // workspace/ is the branch's upper directory, bound over the view by the broker: the host sees the bind.
    const workspace = d.path('demo@sb', 'workspace');
    expect(await until(async () => (await hostMounts(base)).has(workspace))).toBe(true);
    expect((await hostMounts(base)).get(workspace)?.options).toEqual(expect.arrayContaining(['nosuid', 'nodev']));
    await fs.writeFile(`${workspace}/scratch.txt`, 'fast\n');
    const upper = (await run('find', [`${base}/state`, '-path', '*/sb/*', '-name', 'scratch.txt'])).stdout.trim();
    expect(upper).toMatch(/upper\/workspace\/scratch\.txt$/);
    expect(brokerLog).toMatch(/"op": "fusermount", "args": \["-o", "[^"]*allow_other/);
  });

  it("the broker (its socket is root's alone) mounts only nasd's mount point, binds only from the state directory, and follows no symlink", async () => {
    const refused = async (args: string[], why: RegExp, uid = 0) => {
      const r = await relay(args, uid);
      expect(r.code, r.stderr).not.toBe(0);
      expect(r.stderr).toMatch(why);
    };
    // An agent plants a symlink in its view where a bind could be asked for: the broker does not follow it.
    expect((await d.nas('branch', 'create', 'demo/evil')).code).toBe(0);
    const view = `${d.mnt}/demo@evil`;
    await fs.symlink('/etc', `${view}/workspace/evil`);
    const homes = `${base}/state/homes`;
    await refused(['bind', homes, `${view}/workspace/evil`], /refused: .*evil is a symlink or not a directory/);
    await refused(['bind', '/etc', `${view}/outbox`], /refused: \/etc is not inside/);
    await refused(['bind', homes, '/tmp'], /refused: \/tmp is not inside/);
    await refused(['bind', `${base}/state/../..`, `${view}/outbox`], /not an absolute, normalised path/);
    await fs.symlink('/root', `${base}/state/link`);
    await refused(['bind', `${base}/state/link`, `${view}/outbox`], /refused: .*link is a symlink or not a directory/);
    await refused(['umount', '/'], /refused: \/ is not a bind this broker made/);
    await refused(['umount', `${view}/outbox`], /is not a bind this broker made/);
    // A request that is not even an object is answered, and the broker goes on serving.
    const raw = await run('python3', ['-c', 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"[]"); s.shutdown(1); print(s.recv(999).decode())', `${base}/broker.sock`]);
    expect(raw.stdout).toMatch(/refused: a request is a JSON object/);
    await refused(['bind', homes, `${view}/outbox`], /cannot reach nas-mount-broker.*Permission denied/, 65534);
    // As fusermount (the name libfuse calls it by): nothing but nasd's mount point, and never setuid.
    await fs.symlink(RELAY, `${base}/fusermount`);
    const asFusermount = (args: string[]) => run(`${base}/fusermount`, args, { env: { NAS_MOUNT_BROKER: `${base}/broker.sock` } });
    expect((await asFusermount(['-uz', '/'])).stderr).toMatch(/may only act on/);
    for (const option of ['suid', 'dev', 'blkdev', 'fsname=/dev/sda']) {
      expect((await asFusermount(['-o', `rw,${option}`, '--', d.mnt])).stderr).toMatch(new RegExp(`mount option ${option} is not one nasd uses`));
    }
    // Nothing was mounted in the view but its own workspace/ bind.
    expect([...(await hostMounts(base)).keys()].filter((m) => m.includes('@evil'))).toEqual([`${view}/workspace`]);
  });

  it('stopped, nasd takes its binds and its mount away through the broker', async () => {
    expect((await d.nas('branch', 'create', 'demo/last')).code).toBe(0);
    const workspace = d.path('demo@last', 'workspace');
    expect(await until(async () => (await hostMounts(base)).has(workspace))).toBe(true);
    const gone = new Promise((r) => d.child.once('exit', r));
    process.kill(d.child.pid!, 'SIGTERM');
    await gone;
    const left = await hostMounts(base);
    expect([...left.keys()].filter((m) => m.startsWith(`${d.mnt}/`))).toEqual([]);
    expect(left.has(d.mnt)).toBe(false);
  });
});

/** Polls check for up to 5 s. */
async function until(check: () => Promise<boolean>): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}
