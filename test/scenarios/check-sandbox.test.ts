import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TestDaemon, eventually, run } from '../helpers.js';

/**
 * Custom PR checks run apart (security issue 30, item 1): each in a directory of its own that only the check's
 * user (nobody) and root reach, not in the shared temp directory; removed afterwards without following a link the
 * check planted; and everything the check started, also a process that called setsid(), gone when it ends.
 * nasd runs here with umask 0, as the attack found it: nothing may depend on the umask.
 */

/** Another local user: what it may not do to a check's files. */
const OTHER = 'daemon';
const BULK = 2000;

describe('custom checks run apart', () => {
  let d: TestDaemon;
  /** A folder every user may write: the checks leave their pids and paths there. */
  let probe: string;
  /** Root's files a check points a link at: nasd must not remove them. */
  let victim: string;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const asOther = (...cmd: string[]) => run('runuser', ['-u', OTHER, '--', ...cmd]);
  const lease = async (spec: string) => {
    const r = await d.nas('lease', 'issue', spec, '--principal', 'alice');
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  /** A branch with one changed file, proposed with the named check. */
  const propose = async (branch: string, check: string, file = 'outbox/note.md', mode = 0o644) => {
    expect((await d.nas('branch', 'create', `demo/${branch}`)).code).toBe(0);
    const token = await lease(`demo/${branch}`);
    await fs.writeFile(p(branch, file), `${branch}\n`);
    await fs.chmod(p(branch, file), mode);
    const r = await d.nasWith({ NAS_LEASE: token, owner: false }, '--json', 'propose', `demo/${branch}`, '--into', 'main', '--intent', branch, '--checks', check);
    expect(r.stdout, r.stderr).not.toBe('');
    return JSON.parse(r.stdout).checks.find((c: any) => c.name === check);
  };
  /** Running (a zombie has ended); a pid read from a file the check wrote. */
  const alive = async (pid: number) => {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    return stat !== '' && !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  };
  const pidIn = async (name: string) => Number((await fs.readFile(`${probe}/${name}`, 'utf8').catch(() => '')).trim()) || null;
  /** After a test, what a check left running is stopped by its recorded pid, and only if it still runs as nobody. */
  const stopLeftovers = async (...names: string[]) => {
    for (const name of names) {
      const pid = await pidIn(name);
      if (pid && (await alive(pid)) && (await fs.stat(`/proc/${pid}`)).uid === 65534) process.kill(pid, 'SIGKILL');
    }
  };

  beforeAll(async () => {
    const mask = process.umask(0);
    try {
      d = await TestDaemon.start({ extraArgs: ['--demo'] });
    } finally {
      process.umask(mask);
    }
    await fs.chmod(d.dir, 0o755);
    probe = `${d.dir}/probe`;
    await fs.mkdir(probe);
    await fs.chmod(probe, 0o777);
    victim = `${d.dir}/victim`;
    await fs.mkdir(victim, { mode: 0o755 });
    for (let i = 0; i < BULK; i++) await fs.writeFile(`${victim}/f${i}`, 'root\n', { mode: 0o644 });
    // The racer: waits until nasd starts removing bulk/, then swaps bulk/ for a link to the victim's folder.
    const racer = `import os, sys\nn = len(os.listdir('bulk'))\nopen('${probe}/racer-ready', 'w').close()\n` +
      `while len(os.listdir('bulk')) >= n: pass\nos.rename('bulk', 'bulk.real')\nos.symlink('${victim}', 'bulk')\n`;
    await d.pushToMain({
      '.nas/checks.yaml': 'version: 1\nchecks:\n' +
        ['hold', 'swaps', 'leaves'].map((n) => `  - name: ${n}\n    run: .nas/checks/${n}.sh\n    timeout: 30s\n`).join(''),
      // Says where it runs, then waits until the test has looked.
      '.nas/checks/hold.sh': `#!/bin/sh\necho "$NAS_CHANGES" > ${probe}/changes\necho "$PWD" > ${probe}/cwd\n` +
        `while [ ! -e ${probe}/go ]; do sleep 0.05; done\necho held\n`,
      // Turns part of its tree into links to root's folder, and leaves a process to swap one in during removal.
      '.nas/checks/swaps.sh': `#!/bin/sh\nmkdir bulk\ni=0; while [ $i -lt ${BULK} ]; do : > bulk/f$i; i=$((i+1)); done\n` +
        `mv outbox outbox.real && ln -s ${victim} outbox\nln -s ${victim}/f0 file-link\n` +
        `setsid python3 -c "${racer}" </dev/null >/dev/null 2>&1 &\necho $! > ${probe}/racer\n` +
        `while [ ! -e ${probe}/racer-ready ]; do sleep 0.05; done\necho planted\n`,
      // Leaves a process that left its session and group, and one its parent left (a double fork).
      '.nas/checks/leaves.sh': `#!/bin/sh\nsetsid sh -c 'sleep 30; touch ${probe}/marker' </dev/null >/dev/null 2>&1 &\necho $! > ${probe}/setsid\n` +
        `(setsid sleep 31 </dev/null >/dev/null 2>&1 & echo $! > ${probe}/double)\necho left\n`,
    }, 'owner: custom checks');
    await eventually(async () => (await fs.readdir(d.path('demo', '.nas'))).includes('checks.yaml'), 'main to show the checks');
  });
  afterAll(async () => {
    await stopLeftovers('racer', 'setsid', 'double');
    await d?.cleanup();
  });

  it('a running check\'s files are in nasd\'s own root-only folder, the check user\'s alone: no other user lists, changes or reads them', async () => {
    const proposing = propose('private', 'hold', 'outbox/secret.md', 0o600);
    try {
      await eventually(async () => (await fs.readFile(`${probe}/cwd`, 'utf8').catch(() => '')).trim(), 'the check to start');
      const tree = (await fs.readFile(`${probe}/cwd`, 'utf8')).trim();
      const changes = (await fs.readFile(`${probe}/changes`, 'utf8')).trim();
      const own = path.dirname(tree);
      const parent = path.dirname(own);
      // Not a nas-check-* in the shared temp directory: a folder of nasd's own, root's, that no one can list.
      expect(parent).not.toBe(os.tmpdir());
      expect(parent).toBe(`${d.dir}/checks`);
      const mode = async (f: string) => {
        const st = await fs.lstat(f);
        return [st.uid, st.mode & 0o7777];
      };
      expect(await mode(parent)).toEqual([0, 0o711]);
      expect(await mode(own)).toEqual([65534, 0o700]);
      expect(await mode(tree)).toEqual([65534, 0o700]);
      expect(await mode(`${tree}/outbox`)).toEqual([65534, 0o700]);
      expect(await mode(`${tree}/outbox/secret.md`)).toEqual([65534, 0o600]);
      expect(await fs.readFile(`${tree}/outbox/secret.md`, 'utf8')).toBe('private\n');
      expect(path.dirname(changes)).toBe(own);
      // Another user: nothing listed, nothing made, nothing read.
      for (const dir of [parent, own, tree, `${tree}/outbox`]) {
        expect((await asOther('ls', dir)).code, `ls ${dir}`).not.toBe(0);
        expect((await asOther('touch', `${dir}/planted`)).code, `touch in ${dir}`).not.toBe(0);
      }
      expect((await asOther('cat', `${tree}/outbox/secret.md`)).code).not.toBe(0);
      expect((await asOther('cat', changes)).code).not.toBe(0);
      await fs.writeFile(`${probe}/go`, '');
      expect(await proposing).toMatchObject({ ok: true, output: 'held\n' });
      // Gone once the check is decided, and nothing else is left in the checks folder.
      await expect(fs.lstat(own)).rejects.toMatchObject({ code: 'ENOENT' });
      expect(await fs.readdir(parent)).toEqual([]);
    } finally {
      await fs.writeFile(`${probe}/go`, '');
      await proposing.catch(() => undefined);
    }
  });

  it('a link a check plants in its tree, also one swapped in while nasd removes it, removes nothing outside', async () => {
    const check = await propose('swaps', 'swaps').catch((err: Error) => err);
    expect((await fs.readdir(victim)).length).toBe(BULK);
    expect(check).toMatchObject({ ok: true, output: 'planted\n' });
    // The racer it left went with it.
    const racer = await pidIn('racer');
    expect(racer).not.toBeNull();
    expect(await alive(racer!)).toBe(false);
    expect(await fs.readdir(`${d.dir}/checks`)).toEqual([]);
  });

  it('everything a check started is gone when it ends, also a setsid() child and a double fork', async () => {
    const check = await propose('leaves', 'leaves');
    expect(check).toMatchObject({ ok: true, output: 'left\n' });
    for (const name of ['setsid', 'double']) {
      const pid = await pidIn(name);
      expect(pid, name).not.toBeNull();
      expect(await alive(pid!), `${name} (${pid}) still runs`).toBe(false);
    }
  });

  it('what checks left when nasd stopped during them is removed at its next start, links not followed', async () => {
    const stale = `${d.dir}/checks/0123456789abcdef0123456789abcdef`;
    await fs.mkdir(`${stale}/tree/outbox`, { recursive: true });
    await fs.writeFile(`${stale}/tree/outbox/left.md`, 'left\n');
    await fs.symlink(victim, `${stale}/tree/victim`);
    await d.stop();
    const mask = process.umask(0);
    try {
      d = await d.restart();
    } finally {
      process.umask(mask);
    }
    expect(await fs.readdir(`${d.dir}/checks`)).toEqual([]);
    expect((await fs.readdir(victim)).length).toBe(BULK);
  });
});
