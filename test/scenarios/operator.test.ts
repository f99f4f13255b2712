import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ROOT, TestDaemon, eventually, run } from '../helpers.js';

const CLI = `${ROOT}/dist/src/cli/main.js`;
const NASD = `${ROOT}/dist/src/daemon/main.js`;

/** What an operator needs (issue 23, items 13-15): a log of every decision, a second instance, one owner lookup. */
describe('the operator', () => {
  let d: TestDaemon;
  /** The log's JSON lines with this message. */
  const lines = (msg: string) => d.log.split('\n').filter((l) => l.includes(`"msg":"${msg}"`)).map((l) => JSON.parse(l));

  beforeAll(async () => {
    d = await TestDaemon.withBranch('ops');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('logs every PR decision, run start and end, and lease issued or revoked, one line each with its ids', async () => {
    const policy = await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8');
    await d.pushToMain({ '.nas/policy.yaml': `${policy}merge:\n  auto: false\n` }, 'owner: every PR waits');
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8')).includes('auto: false'), 'main to follow the push');

    const issued = await d.nasJson('lease', 'issue', 'demo/ops', '--principal', 'nobody');
    await eventually(async () => lines('lease issued').some((l) => l.lease === issued.lease.id), 'the lease issued line');
    expect(lines('lease issued').find((l) => l.lease === issued.lease.id)).toMatchObject({ level: 30, role: 'demo', branch: 'ops', principal: 'nobody' });
    await d.nasJson('lease', 'revoke', 'demo', issued.lease.id);
    await eventually(async () => lines('lease revoked').some((l) => l.lease === issued.lease.id), 'the lease revoked line');

    await fs.writeFile(d.path('demo@ops', 'outbox/one.md'), 'one\n');
    const first = await d.nasJson('propose', 'demo/ops', '--intent', 'first');
    expect(first.state).toBe('waiting');
    await eventually(async () => lines('pr proposed').some((l) => l.pr === first.id), 'the pr proposed line');
    expect(lines('pr proposed').find((l) => l.pr === first.id)).toMatchObject({ level: 30, role: 'demo', branch: 'ops', state: 'waiting', principal: 'root' });
    await d.nasJson('pr', 'reject', 'demo', String(first.id), '--why', 'not now');
    await eventually(async () => lines('pr rejected').some((l) => l.pr === first.id), 'the pr rejected line');
    expect(lines('pr rejected').find((l) => l.pr === first.id)).toMatchObject({ state: 'rejected', by: 'root', why: 'not now' });

    await fs.writeFile(d.path('demo@ops', 'outbox/two.md'), 'two\n');
    const second = await d.nasJson('propose', 'demo/ops', '--intent', 'second');
    await d.nasJson('pr', 'approve', 'demo', String(second.id));
    await eventually(async () => lines('pr approved').some((l) => l.pr === second.id), 'the pr approved line');
    expect(lines('pr approved').find((l) => l.pr === second.id)).toMatchObject({ state: 'merged', by: 'root', branch: 'ops' });

    const r = await run(process.execPath, [CLI, '--socket', d.socket, '--json', 'run', 'demo', '--user', 'nobody', '--no-propose', '--', 'true'],
      { env: { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' } });
    expect(r.code, r.stderr).toBe(0);
    const id = JSON.parse(r.stdout).run as string;
    await eventually(async () => lines('run ended').some((l) => l.run === id), 'the run ended line');
    const started = lines('run started').find((l) => l.run === id);
    expect(started).toMatchObject({ level: 30, role: 'demo', user: 'nobody' });
    expect(lines('run ended').find((l) => l.run === id)).toMatchObject({ role: 'demo', branch: started.branch, lease: started.lease, state: 'exited', exit: 0 });
    // The run's lease is issued and revoked in the log too.
    expect(lines('lease revoked').some((l) => l.lease === started.lease)).toBe(true);
  });

  it('serves a second instance through the mount helper (web_listen in -o), with its log 0640, and root finds its owner token for every command', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-second-'));
    const mnt = `${dir}/mnt`;
    let pid = 0;
    const nas = (...args: string[]) => run(process.execPath, [CLI, '--socket', `${dir}/nasd.sock`, ...args], { env: { NAS_OWNER_TOKEN_FILE: '', NAS_OWNER_TOKEN: '', NAS_LEASE: '' } });
    try {
      await fs.mkdir(mnt);
      // What mount -t fuse.nasd nasd <mnt> -o ... runs (mount.fuse3 calls the helper so), with this checkout's nasd.
      const r = await run(process.execPath, [NASD, 'nasd', mnt, '-o', `state_dir=${dir}/state,socket=${dir}/nasd.sock,log=${dir}/log/nasd.log,web_listen=127.0.0.1:0,demo`]);
      expect(r.code, r.stderr).toBe(0);
      pid = JSON.parse((await nas('--json', 'status')).stdout).pid;
      expect((await fs.stat(`${dir}/log/nasd.log`)).mode & 0o777).toBe(0o640);
      expect(await fs.readFile(`${dir}/log/nasd.log`, 'utf8')).not.toMatch(/EADDRINUSE/);

      const created = await nas('branch', 'create', 'demo/second');
      expect(created.code, created.stderr).toBe(0);
      await fs.writeFile(`${mnt}/demo@second/outbox/second.md`, 'second\n');
      const proposed = await nas('--json', 'propose', 'demo/second', '--intent', 'from the second instance');
      expect(proposed.code, proposed.stderr).toBe(0);
      expect(JSON.parse(proposed.stdout).provenance.principal).toBe('root');
      expect((await nas('checkpoint', 'create', 'demo', 'cp1')).code).toBe(0);
    } finally {
      await run('umount', [mnt]);
      if (pid) await eventually(async () => !(await fs.access(`/proc/${pid}`).then(() => true, () => false)), 'nasd to stop after umount', 15_000).catch(() => process.kill(pid, 'SIGKILL'));
      await run('fusermount', ['-uz', mnt]);
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
