import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { TestDaemon, eventually, run } from '../helpers.js';
import type { WhyReport } from '../../src/api/types.js';

/**
 * Runs that start while others end: each run's processes are known by its PID namespace, whose number the
 * kernel hands to the next namespace made as soon as the last one is freed. A run that has ended but is not yet
 * finished in nasd must not take a new run's processes for its own (they were refused their own branch view:
 * `mount --rbind <mnt>/demo@run-<id> <mnt>/demo` failed with EACCES, and the run ended failed-to-start).
 * Real namespaces, real processes.
 */
const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');
const PARALLEL = 8;

describe('nas run, while other runs end', () => {
  let d: TestDaemon;
  let shared: string;
  const env = () => ({ NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' });
  const nasRun = (...args: string[]) => run(process.execPath, [CLI, '--socket', d.socket, 'run', '--json', ...args], { env: env() });

  beforeAll(async () => {
    d = await TestDaemon.withBranch('draft');
    shared = `${d.dir}/shared`;
    await fs.mkdir(shared);
    await fs.chmod(shared, 0o1777);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('starts eight runs at once, and each one\'s file is on main through its PR', async () => {
    const results = await Promise.all(Array.from({ length: PARALLEL }, (_, i) =>
      nasRun('demo', '--user', 'nobody', '--intent', `parallel ${i}`, '--', 'sh', '-c', `mkdir -p outbox/p${i} && echo "run ${i}" > outbox/p${i}/note.md`)));
    for (const [i, r] of results.entries()) {
      // A set-up that failed says why on stderr (mount's message): it is what the assertion shows.
      expect(r.code, `run ${i}: ${r.stderr}`).toBe(0);
      expect(JSON.parse(r.stdout), `run ${i}: ${r.stderr}`).toMatchObject({ state: 'exited', exit: 0, pr: { state: 'merged' } });
    }
    for (let i = 0; i < PARALLEL; i++) expect((await d.gitBlob(`main:outbox/p${i}/note.md`)).toString()).toBe(`run ${i}\n`);
    // Nothing of one run was taken for another's: no run was refused a view (the owner sees every refusal).
    const why = await d.nasJson<WhyReport>('why');
    expect(why.refusals.map((f) => `${f.op} ${f.path}: ${f.why}`)).toEqual([]);
  });

  it('starts a run while an ended run is not finished yet (its nas run stopped), then finishes that one too', async () => {
    // The first run's command ends while its nas run is stopped: its namespace is gone, nasd still counts it live.
    const first = spawn(process.execPath, [CLI, '--socket', d.socket, 'run', '--json', 'demo', '--user', 'nobody', '--intent', 'first', '--', 'sh', '-c',
      `echo first > outbox/first.md; touch ${shared}/started; while [ ! -e ${shared}/end ]; do sleep 0.05; done`], { env: { ...process.env, ...env() }, stdio: ['ignore', 'pipe', 'pipe'] });
    let firstOut = '';
    first.stdout!.on('data', (c) => (firstOut += c));
    const firstDone = new Promise<number | null>((resolve) => first.once('close', resolve));
    try {
      await eventually(async () => fs.access(`${shared}/started`).then(() => true, () => false), 'the first run\'s command');
      process.kill(first.pid!, 'SIGSTOP');
      await fs.writeFile(`${shared}/end`, '');
      // unshare has reaped the namespace's init (so the namespace is freed) once it is a zombie of the stopped nas run.
      await eventually(async () => (await childrenOf(first.pid!)).find((c) => c.comm === 'unshare' && c.state === 'Z'), 'the first run\'s namespace to end');
      const r = await nasRun('demo', '--user', 'nobody', '--intent', 'second', '--', 'sh', '-c', 'echo second > outbox/second.md');
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout), r.stderr).toMatchObject({ state: 'exited', exit: 0, pr: { state: 'merged' } });
      expect((await d.gitBlob('main:outbox/second.md')).toString()).toBe('second\n');
    } finally {
      process.kill(first.pid!, 'SIGCONT');
    }
    expect(await firstDone).toBe(0);
    expect(JSON.parse(firstOut)).toMatchObject({ state: 'exited', exit: 0, pr: { state: 'merged' } });
    expect((await d.gitBlob('main:outbox/first.md')).toString()).toBe('first\n');
  });
});

/** The child processes of a process: command name and state (fields 2 and 3 of /proc/<pid>/stat). */
async function childrenOf(parent: number): Promise<{ pid: number; comm: string; state: string }[]> {
  const found = [];
  for (const name of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await fs.readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    const close = stat.lastIndexOf(')');
    const [state, ppid] = stat.slice(close + 2).split(' ');
    if (Number(ppid) === parent) found.push({ pid: Number(name), comm: stat.slice(stat.indexOf('(') + 1, close), state: state! });
  }
  return found;
}
