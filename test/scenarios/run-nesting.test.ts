import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { TestDaemon, eventually, run } from '../helpers.js';

/**
 * A run stays a run in a namespace of its own making (security, third round, item 2): it cannot make a user
 * namespace (and so no other namespace), and a process in a PID namespace below the run's is the run's, for
 * what nasd answers and for what the binding answers from its cache alike.
 */
const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

describe('a run and the namespaces below it', () => {
  let d: TestDaemon;
  let shared: string;
  const env = () => ({ NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' });
  const startRun = (...args: string[]): ChildProcess =>
    spawn(process.execPath, [CLI, '--socket', d.socket, 'run', '--json', ...args], { env: { ...process.env, ...env() }, stdio: ['ignore', 'pipe', 'pipe'] });
  const ended = (child: ChildProcess) => new Promise<number | null>((resolve) => child.once('close', resolve));
  const marker = async (name: string) => (await eventually(async () => fs.readFile(`${shared}/${name}`, 'utf8').then((text) => ({ text }), () => null), `marker ${name}`)).text;
  const inbox = () => d.path('demo@elsewhere', 'inbox/README.md');

  beforeAll(async () => {
    d = await TestDaemon.withBranch('elsewhere');
    shared = `${d.dir}/shared`;
    await fs.mkdir(shared);
    await fs.chmod(shared, 0o1777);
    // nobody holds a lease on another branch: outside a run it reads that branch's inbox (and the cache keeps it).
    expect((await d.nas('lease', 'issue', 'demo/elsewhere', '--principal', 'nobody', '--ttl', '1h')).code).toBe(0);
    expect((await run('runuser', ['-u', 'nobody', '--', 'cat', inbox()])).code).toBe(0);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('refuses a run a user namespace, so it makes no namespace of its own; ordinary processes still start', async () => {
    const child = startRun('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `unshare -Urpf sh -c 'cat ${inbox()}' > ${shared}/nested-out 2> ${shared}/nested-err; echo $? > ${shared}/nested-code; ` +
      `unshare -U true 2>> ${shared}/nested-err; echo $? >> ${shared}/nested-code; ` +
      `(echo forked > ${shared}/forked &); wait; sleep 0.1; cat AGENTS.md > /dev/null && echo home >> ${shared}/forked`);
    expect(await ended(child)).toBe(0);
    expect(await fs.readFile(`${shared}/nested-out`, 'utf8')).toBe('');
    expect((await fs.readFile(`${shared}/nested-code`, 'utf8')).split('\n').filter(Boolean)).toEqual(['1', '1']);
    expect(await fs.readFile(`${shared}/nested-err`, 'utf8')).toMatch(/Operation not permitted/);
    expect(await fs.readFile(`${shared}/forked`, 'utf8')).toBe('forked\nhome\n');
  });

  it("counts a process in a PID namespace below a run's as the run's: other branches stay closed to it", async () => {
    const wait = `while [ ! -e ${shared}/nest-done ]; do sleep 0.05; done`;
    const child = startRun('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c', `echo ready > ${shared}/nest-ready; ${wait}`);
    const done = ended(child);
    try {
      await marker('nest-ready');
      // The run's shell, by its command line, as the host numbers it.
      const pid = await eventually(async () => {
        for (const name of await fs.readdir('/proc')) {
          if (!/^\d+$/.test(name)) continue;
          const cmdline = (await fs.readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0').filter(Boolean);
          if (cmdline.length === 3 && cmdline[1] === '-c' && cmdline[2].includes('nest-ready')) return Number(name);
        }
        return null;
      }, 'the run\'s shell');
      // Root makes a PID namespace inside the run's (what a run could do with a user namespace) and reads as nobody:
      // once asking nasd (a name not seen before) and once what the binding has cached (read outside the run above).
      const nested = (cmd: string) => run('nsenter', ['--target', String(pid), '--pid', '--mount', '--', 'unshare', '--pid', '--fork', '--mount-proc', '--',
        'setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', '--', 'sh', '-c', cmd]);
      const cached = await nested(`cat ${inbox()}`);
      expect(cached.code).not.toBe(0);
      expect(cached.stderr).toMatch(/Permission denied/);
      const listing = await nested(`ls ${d.path('demo@elsewhere', 'outbox')}`);
      expect(listing.stderr).toMatch(/Permission denied/);
      // Its own branch (the Home's path inside the run) it reads as the run does.
      const own = await nested(`cat ${d.path('demo', 'AGENTS.md')} > /dev/null && echo own`);
      expect(own.stdout).toBe('own\n');
    } finally {
      await fs.writeFile(`${shared}/nest-done`, '');
      await done;
    }
  });
});
