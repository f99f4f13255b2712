import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '../helpers.js';

const exec = promisify(execFile);

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
