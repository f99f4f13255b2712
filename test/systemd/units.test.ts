import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '../helpers.js';
import { Container } from './container.js';

/**
 * The units under a real systemd: a Debian bookworm booted by systemd-nspawn (container.ts), the checkout at
 * /opt/agent-nas, the units installed as the operator's guide (docs/operating.md) says. One boot for the whole file; the
 * tests run in order and build on each other (a Home, a branch, its commits). The container is stopped by
 * systemd-nspawn's pid after the last one, also when one fails.
 */
const UNITS = '/opt/agent-nas/systemd';
const STORE = '/var/lib/agent-nas/homes/demo.git';
/** The operator's guide's fstab line (docs/operating.md), with a second instance's own state_dir, socket and web_listen. */
const FSTAB = 'nasd /srv/nasfstab fuse.nasd state_dir=/var/lib/agent-nas-fstab,socket=/run/agent-nas-fstab/nasd.sock,web_listen=off,demo,_netdev 0 0\n';
/** A long commit window: a write closed just before a stop, restart or kill is still pending then. */
const YAML = 'demo: true\ncommit_window_ms: 10000\n';

describe('the units under systemd (systemd-nspawn)', () => {
  let c: Container;
  const ok = (cmd: string) => c.ok(cmd);
  /** Subjects of branch b1's commits that touched a path. */
  const commitsOf = (file: string) => ok(`git --git-dir=${STORE} log --format=%s b1 -- ${file}`);
  const mainPid = async () => Number((await ok('systemctl show -p MainPID --value nasd')).trim());
  const operatorGuide = () => fs.readFile(path.join(ROOT, 'docs/operating.md'), 'utf8');

  beforeAll(async () => {
    try {
      c = await Container.boot({ files: { '/etc/fstab': FSTAB } });
    } catch (err) {
      // One line, and the suite fails: a machine that cannot build or boot the container has not tested the units.
      console.error((err as Error).message.split('\n')[0]);
      throw err;
    }
  }, 600_000);

  afterAll(async () => {
    await c?.stop();
  }, 60_000);

  it('an fstab line with the mount helper mounts at boot', async () => {
    expect(await ok('systemctl is-active srv-nasfstab.mount')).toBe('active\n');
    expect(await ok('findmnt -n -o FSTYPE,OPTIONS /srv/nasfstab')).toMatch(/^fuse\.nasd .*nosuid,nodev/);
    expect(await ok('cat /srv/nasfstab/demo/AGENTS.md')).toMatch(/\S/);
    expect(await ok('nas --socket /run/agent-nas-fstab/nasd.sock status')).toMatch(/^demo /m);
  });

  it('systemctl start nasd: the broker first, then nasd, ready only once the mount serves; nas status; a write commits', async () => {
    await ok(`mkdir -p /etc/agent-nas && printf '${YAML}' >/etc/agent-nas/nasd.yaml`);
    // The operator's guide's commands; the mount is read the moment systemctl returns (it waits for READY=1).
    const out = await ok(`cp ${UNITS}/nasd.service ${UNITS}/nas-mount-broker.service /etc/systemd/system/ && systemctl enable --now nasd &&
      findmnt -n -o FSTYPE,OPTIONS /agents && cat /agents/demo/AGENTS.md >/dev/null && echo served`);
    expect(out).toMatch(/^fuse\.nasd .*nosuid,nodev.*\nserved\n$/);
    const show = await ok('systemctl show -p Type -p NotifyAccess -p StatusText -p ActiveState nasd');
    expect(show).toContain('Type=notify');
    expect(show).toContain('ActiveState=active');
    expect(show).toContain('StatusText=serving /agents, control socket /run/agent-nas/nasd.sock');
    const brokerUp = Number(await ok('systemctl show -p ActiveEnterTimestampMonotonic --value nas-mount-broker'));
    const nasdStarted = Number(await ok('systemctl show -p ExecMainStartTimestampMonotonic --value nasd'));
    expect(brokerUp).toBeGreaterThan(0);
    expect(nasdStarted).toBeGreaterThan(brokerUp);

    expect(await ok('nas status')).toMatch(/^demo /m);
    await ok('nas branch create demo/b1 && echo one >/agents/demo@b1/outbox/one.md && nas sync demo/b1');
    expect(await commitsOf('outbox/one.md')).toMatch(/outbox\/one\.md/);
  }, 120_000);

  it('the sandbox holds: the exposure docs/operating.md states, no CAP_SYS_ADMIN, a read-only /usr, /proc of processes only', async () => {
    const text = await operatorGuide();
    const stated = {
      nasd: /`systemd-analyze security`: \*\*(\d+\.\d)\*\*/.exec(text)?.[1],
      'nas-mount-broker': /the broker's own exposure: (\d+\.\d)/i.exec(text)?.[1],
    };
    for (const [unit, value] of Object.entries(stated)) {
      expect(value, `docs/operating.md states ${unit}'s exposure`).toBeDefined();
      expect(await ok(`systemd-analyze security ${unit} --no-pager | tail -1`)).toContain(`${unit}.service: ${value} `);
    }
    const pid = await mainPid();
    const status = await ok(`cat /proc/${pid}/status`);
    for (const set of ['CapEff', 'CapBnd']) {
      const mask = BigInt(`0x${new RegExp(`^${set}:\\s*([0-9a-f]+)$`, 'm').exec(status)![1]}`);
      expect(mask & (1n << 21n), `${set} has CAP_SYS_ADMIN`).toBe(0n);
    }
    expect(status).toMatch(/^NoNewPrivs:\s*1$/m);
    expect(await ok(`readlink /proc/${pid}/ns/mnt`)).not.toBe(await ok('readlink /proc/1/ns/mnt'));
    // nasd's view of the filesystem: its mount namespace, entered as root, still cannot write /usr.
    const usr = await c.sh(`nsenter -t ${pid} -m touch /usr/nas-probe`);
    expect(usr.code).not.toBe(0);
    expect(usr.stderr).toContain('Read-only file system');
    expect((await c.sh(`nsenter -t ${pid} -m test -e /proc/uptime`)).code).not.toBe(0); // ProcSubset=pid
    // ... and the relay stands in for fusermount (libfuse 2) and fusermount3 (libfuse 3) there.
    for (const name of ['fusermount', 'fusermount3']) expect(await ok(`nsenter -t ${pid} -m head -c 200 /usr/bin/${name}`)).toContain('nas-mount-relay');
  }, 60_000);

  it('systemctl stop nasd commits pending work and unmounts, the workspace/ binds too', async () => {
    await ok('echo two >/agents/demo@b1/outbox/two.md && echo ws >/agents/demo@b1/workspace/w.txt');
    expect(await ok('findmnt -n -o TARGET -R /agents')).toContain('/agents/demo@b1/workspace');
    expect(await commitsOf('outbox/two.md')).toBe(''); // pending: the commit window is 10 s
    await ok('systemctl stop nasd');
    expect((await c.sh('findmnt -R /agents')).stdout).toBe('');
    expect(await commitsOf('outbox/two.md')).toMatch(/two\.md/);
    expect(await ok(`cat ${STORE}/nas/branches/b1/upper/workspace/w.txt`)).toBe('ws\n');
  }, 60_000);

  it('systemctl restart nasd and kill -9 of nasd (Restart= brings it back) lose no closed write', async () => {
    await ok('systemctl start nasd && echo three >/agents/demo@b1/outbox/three.md && systemctl restart nasd');
    expect(await ok('cat /agents/demo@b1/outbox/three.md')).toBe('three\n');
    expect(await commitsOf('outbox/three.md')).toMatch(/three\.md/);

    await ok('echo four >/agents/demo@b1/outbox/four.md');
    const before = await mainPid();
    await ok(`kill -9 ${before}`);
    let after = 0;
    for (let i = 0; i < 150 && !(after && after !== before); i++) {
      await new Promise((r) => setTimeout(r, 200));
      if ((await c.sh('systemctl is-active -q nasd')).code === 0) after = await mainPid();
    }
    expect(after, 'nasd is back under a new pid').not.toBe(before);
    expect(await ok('journalctl -u nasd -o cat --no-pager')).toContain('Scheduled restart job');
    expect(await ok('cat /agents/demo@b1/outbox/four.md')).toBe('four\n');
    await ok('nas sync demo/b1');
    expect(await commitsOf('outbox/four.md')).toMatch(/four\.md/);
    expect(await ok('findmnt -n -o TARGET -R /agents')).toContain('/agents/demo@b1/workspace');
  }, 120_000);

  it('systemctl reload nasd: nasd becomes the next nasd in the same process; a shell in the mount and a file held open carry on', async () => {
    // A shell with its cwd in a branch and a file open for writing, across the reload (a unit of its own).
    await ok("systemd-run --unit=holder -p WorkingDirectory=/agents/demo@b1/outbox bash -c 'exec 3>held.md; echo one >&3; " +
      "while [ ! -e /run/go ]; do sleep 0.1; done; echo two >&3; exec 3>&-; ls > listing.txt; pwd > pwd.txt'");
    const before = await mainPid();
    await ok('systemctl reload nasd');
    expect(await ok('systemctl is-active nasd')).toBe('active\n');
    expect(await mainPid()).toBe(before);
    await ok('touch /run/go');
    for (let i = 0; i < 100 && (await c.sh('systemctl is-active -q holder')).code === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await ok('systemctl show -p Result --value holder')).toBe('success\n');
    expect(await ok('cat /agents/demo@b1/outbox/held.md')).toBe('one\ntwo\n');
    expect(await ok('cat /agents/demo@b1/outbox/listing.txt')).toContain('held.md');
    expect(await ok('cat /agents/demo@b1/outbox/pwd.txt')).toBe('/agents/demo@b1/outbox\n');
    const journal = await ok('journalctl -u nasd -o cat --no-pager');
    expect(journal).toContain('this process becomes the next nasd');
    expect(journal).toContain('took the kernel connection over');
    await ok('nas sync demo/b1');
    expect(await commitsOf('outbox/held.md')).toMatch(/held\.md/);
  }, 60_000);

  it('nasd\'s log reaches the journal at its levels: runs and PRs in journalctl -u nasd, no errors, a warning as one', async () => {
    expect(await ok(`nas run demo --user nobody --intent 'notes' -- sh -c 'echo hi >outbox/run.md'`)).toBe('');
    const log = await ok('journalctl -u nasd -o cat --no-pager');
    for (const msg of ['run started', 'run ended', 'pr proposed', 'pr decided by policy', 'commit', 'nasd ready']) expect(log).toContain(`"msg":"${msg}"`);
    // Nothing went wrong so far (an error each 5 s was /proc/uptime hidden by ProcSubset=pid).
    expect(await ok('journalctl -u nasd -p err -o cat --no-pager')).toBe('');
    expect(await ok(`journalctl -u nasd -p info..info -o cat --no-pager --grep '"msg":"nasd ready"'`)).toContain('nasd ready');
    // umount from outside: nasd warns, commits and exits cleanly (no restart).
    await ok('umount -R /agents');
    for (let i = 0; i < 100 && !/^(inactive|failed)$/.test((await c.sh('systemctl is-active nasd')).stdout.trim()); i++) await new Promise((r) => setTimeout(r, 200));
    expect((await c.sh('systemctl is-active nasd')).stdout).toBe('inactive\n');
    const warnings = await ok('journalctl -u nasd -p warning..warning -o cat --no-pager');
    expect(warnings).toContain('"msg":"the mount was removed from outside: stopping"');
    expect(warnings).not.toContain('"level":30');
    expect(await ok('journalctl -u nasd -p err -o cat --no-pager')).toBe(''); // the binds went with the mount: nothing to undo
    await ok('systemctl start nasd');
  }, 120_000);

  it('the maintenance timer is scheduled, and its service runs and writes its report to the journal', async () => {
    await ok(`cp ${UNITS}/nas-maintenance.service ${UNITS}/nas-maintenance.timer /etc/systemd/system/ && systemctl enable --now nas-maintenance.timer`);
    expect(await ok('systemctl list-timers --all --no-pager')).toContain('nas-maintenance.timer');
    // Every unit as systemd reads it: no warning about any setting.
    const verify = await c.sh('cd /etc/systemd/system && systemd-analyze verify nasd.service nas-mount-broker.service nas-maintenance.service nas-maintenance.timer');
    expect(verify.stdout + verify.stderr).toBe('');
    expect(verify.code).toBe(0);
    await ok('systemctl start nas-maintenance.service');
    const report = await ok('journalctl -u nas-maintenance -o cat --no-pager');
    expect(report).toMatch(/HOME\s+PURGED/);
    expect(report).toMatch(/^demo\s+\d/m);
    expect(await ok('systemd-analyze security nas-maintenance --no-pager | tail -1')).toContain(`: ${/\(exposure (\d+\.\d): it only talks/.exec(await operatorGuide())?.[1]} `);
  }, 120_000);

  it('a mount path and socket changed in /etc/agent-nas/nasd.yaml work through the units', async () => {
    await ok(`printf '${YAML}mount: /srv/agents\nsocket: /run/nas-ctl/nasd.sock\n' >/etc/agent-nas/nasd.yaml && systemctl restart nas-mount-broker nasd`);
    expect(await ok('findmnt -n -o FSTYPE /srv/agents')).toBe('fuse.nasd\n');
    expect((await c.sh('findmnt /agents')).code).not.toBe(0);
    expect(await ok('cat /srv/agents/demo@b1/outbox/four.md')).toBe('four\n');
    expect(await ok('findmnt -n -o TARGET -R /srv/agents')).toContain('/srv/agents/demo@b1/workspace');
    expect(await ok('nas --socket /run/nas-ctl/nasd.sock status')).toMatch(/^demo /m);
    expect(await ok('systemctl show -p StatusText --value nasd')).toBe('serving /srv/agents, control socket /run/nas-ctl/nasd.sock\n');
    await ok('systemctl start nas-maintenance.service');
    await ok('systemctl stop nasd');
    expect((await c.sh('findmnt -R /srv/agents')).stdout).toBe('');
  }, 120_000);
});
