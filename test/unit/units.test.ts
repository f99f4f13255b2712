import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '../helpers.js';

const exec = promisify(execFile);

/** systemd-analyze (Debian's systemd package), when it is installed: it reads units offline, no running systemd needed. */
const analyze = await exec('systemd-analyze', ['--version']).then(() => true, () => false);

/** The systemd units (issue 23, item 14): what nasd.yaml may change is asked of nasd, never written in a unit. */
describe('systemd units', () => {
  const unit = async (name: string) => fs.readFile(`${ROOT}/systemd/${name}`, 'utf8');
  /** The value of each `Key=` line of a unit (continuations are not used in ours). */
  const values = (text: string, key: string) => text.split('\n').filter((l) => l.startsWith(`${key}=`)).map((l) => l.slice(key.length + 1));

  it('names no mount point or socket in the commands around nasd: it asks nasd --print-config', async () => {
    const services = (await fs.readdir(`${ROOT}/systemd`)).filter((f) => f.endsWith('.service'));
    expect(services).toContain('nasd.service');
    for (const name of services) {
      for (const key of ['ExecStartPre', 'ExecStartPost', 'ExecStopPost', 'ExecStop']) {
        for (const line of values(await unit(name), key)) {
          expect([name, key, line]).not.toEqual([name, key, expect.stringMatching(/\/agents\b|\/run\/agent-nas\/nasd\.sock/)]);
        }
      }
    }
    const nasd = await unit('nasd.service');
    // Readiness is nasd's own (Type=notify): no command waits for the socket. What a stop unmounts, the script asks.
    expect(values(nasd, 'Type')).toEqual(['notify']);
    expect(values(nasd, 'ExecStopPost').join('\n')).toMatch(/libexec\/nasd-stop-post/);
    const stopPost = await fs.readFile(`${ROOT}/libexec/nasd-stop-post`, 'utf8');
    expect(stopPost).toMatch(/--print-config mount/);
    expect(stopPost).toMatch(/--print-config state_dir/);
    // A shell's $ is written $$ (systemd would expand $name itself).
    for (const line of [...values(nasd, 'ExecStartPost'), ...values(nasd, 'ExecStopPost')]) expect(line.replace(/\$\$/g, '')).not.toMatch(/\$/);
    expect(values(nasd, 'LimitNOFILE')).toHaveLength(1);
  });

  it('the cluster drop-in adds etcd and the git server to the unit\'s allow list, by address, and lifts nothing else', async () => {
    const nasd = await unit('nasd.service');
    const dropIn = await unit('nasd-cluster.conf.example');
    expect(values(nasd, 'IPAddressDeny')).toEqual(['any']);
    expect(values(nasd, 'IPAddressAllow')).toEqual(['localhost']);
    // Added to the list (an empty IPAddressAllow= would reset it, a name is ignored by systemd), the deny kept.
    const allowed = values(dropIn, 'IPAddressAllow');
    expect(allowed.length).toBeGreaterThan(0);
    for (const v of allowed) expect(v).toMatch(/^[0-9a-f.:/]+( [0-9a-f.:/]+)*$/i);
    const keys = dropIn.split('\n').filter((l) => /^[A-Za-z]+=/.test(l)).map((l) => l.slice(0, l.indexOf('=')));
    expect([...new Set(keys)].sort()).toEqual(['After', 'IPAddressAllow', 'TimeoutStartSec', 'Wants']);
    expect(await fs.readFile(`${ROOT}/docs/cluster.md`, 'utf8')).toContain('systemd/nasd-cluster.conf.example');
  });

  it.skipIf(!analyze)('systemd-analyze verify reads every unit, and nasd.service with the cluster drop-in, without a word', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-units-verify-'));
    try {
      // The units as installed, the checkout standing in for /opt/agent-nas (verify checks that each command exists).
      const units = (await fs.readdir(`${ROOT}/systemd`)).filter((f) => /\.(service|timer)$/.test(f));
      for (const name of units) await fs.writeFile(`${dir}/${name}`, (await unit(name)).replaceAll('/opt/agent-nas', ROOT));
      await fs.mkdir(`${dir}/nasd.service.d`);
      await fs.writeFile(`${dir}/nasd.service.d/cluster.conf`, await unit('nasd-cluster.conf.example'));
      const r = await exec('systemd-analyze', ['verify', ...units.map((u) => `./${u}`)], { cwd: dir }).catch((err) => err as { stdout: string; stderr: string });
      expect(r.stdout + r.stderr).toBe('');
      // ... and it did read the drop-in.
      const show = await exec('systemd-analyze', ['verify', './nasd.service'], { cwd: dir, env: { ...process.env, SYSTEMD_LOG_LEVEL: 'debug' } });
      expect(show.stdout + show.stderr).toContain(`DropIn Path: ${dir}/nasd.service.d/cluster.conf`);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('nasd --print-config answers from nasd.yaml, as nasd would use it', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-units-'));
    try {
      await fs.writeFile(`${dir}/nasd.yaml`, 'mount: /srv/nas\nsocket: /run/nas2/nasd.sock\n');
      const ask = async (...args: string[]) => (await exec(process.execPath, [`${ROOT}/dist/src/daemon/main.js`, '--config', `${dir}/nasd.yaml`, ...args])).stdout;
      expect(await ask('--print-config', 'mount')).toBe('/srv/nas\n');
      expect(await ask('--print-config', 'socket')).toBe('/run/nas2/nasd.sock\n');
      expect(await ask('--print-config', 'mount', '--mount', '/elsewhere')).toBe('/elsewhere\n');
      await expect(ask('--print-config', 'colour')).rejects.toMatchObject({ stderr: expect.stringMatching(/--print-config needs a setting/) });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
