import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ROOT, run } from '../helpers.js';

/**
 * Every benchmark the docs document (docs/architecture.md, Development), run once at the smallest sizes: a documented command must not rot (two
 * did, unseen: an import of a module that had moved, a branch name that became a refused one). Nothing here is
 * timed or compared; each script must finish and print what it measures. The numbers are bench/run.sh's, at full size.
 */
const LONG = 600_000;
const node = (script: string, ...args: string[]) => run(process.execPath, [`${ROOT}/bench/${script}`, ...args], { cwd: ROOT });
/** Finished (exit 0) and printed what it is for. */
const expectDone = (r: { code: number; stdout: string; stderr: string }, printed: RegExp) => {
  expect(r.code, `${r.stderr.slice(-2000)}\n${r.stdout.slice(-2000)}`).toBe(0);
  expect(r.stdout).toMatch(printed);
};

describe('the benchmarks, once each at the smallest sizes', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bench-quick-'));
    // The benchmarks' own users (the SMB account, a run's user) reach what they make below it.
    await fs.chmod(dir, 0o755);
  });
  afterAll(async () => {
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  it('memory.mjs', async () => expectDone(await node('memory.mjs', '--topics', '20'), /\| Store \(git\), warm \|/), LONG);
  it('metrics-overhead.mjs', async () => expectDone(await node('metrics-overhead.mjs'), /one scrape/), LONG);
  it('merge.mjs', async () => expectDone(await node('merge.mjs', '--files', '200', '--sizes', '1,5'), /8\/8 merged.*none lost: yes/s), LONG);
  it('lifecycle.mjs', async () => expectDone(await node('lifecycle.mjs', '--big', '300', '--mid', '100'), /refs identical after import\s+yes/), LONG);
  // Not "800 of 800": some of 8 runs started at once fail to bind their view (mount --rbind), on this code before
  // this change too (a known bug, in the notes); the benchmark reports it, the suite checks only that it runs.
  it('nas-run.mjs', async () => expectDone(await node('nas-run.mjs', '--runs', '2', '--big-home', '300'), /big\/fresh +p50 [\d.]+x[\s\S]*files on main: \d+ of 800/), LONG);
  it('restart.mjs', async () => expectDone(await node('restart.mjs', '--cycles', '1', '--branches', '2'), /longest wait .*, 0 errors/), LONG);
  it('crash-loop.mjs', async () => expectDone(await node('crash-loop.mjs', '--kills', '1'), /lost: 0[\s\S]*git fsck: clean/), LONG);
  it('web.mjs', async () => expectDone(await node('web.mjs', '--homes', '1', '--prs', '3', '--files', '30'), /next page of 25 files/), LONG);

  it('last-change.mjs, on a history with merges and deletions', async () => {
    const repo = `${dir}/home.git`;
    expectDone(await node('deep-repo.mjs', repo, '--commits', '300', '--files', '60'), /300 commits/);
    expectDone(await node('last-change.mjs', repo), /wrong answers in a sample: 0/);
  }, LONG);

  it('bench/run.sh (micro, memory, agent, restart and metrics, with their peers)', async () => {
    const r = await run('bash', [`${ROOT}/bench/run.sh`, '--reps', '1', '--files', '20', '--seq-mib', '1', '--big-home', '300',
      '--agent-entries', '200', '--branches', '2', '--restart-cycles', '1', '--rounds', '1', '--deep-commits', '300', '--deep-files', '100', '--root', `${dir}/run`], { cwd: ROOT });
    expectDone(r, /\d+ of \d+ met/);
    // Who answered each workload's requests: the binding alone, or nasd's JS (from its /metrics).
    expect(r.stdout).toMatch(/\| sequential write 1 MiB in 4 KiB writes \(commit incl\.\) \| [\d,]+ \| [\d,]+ \| \d+% \|/);
  }, LONG * 2);

  it('bench/run.sh --only metrics (metrics_cost.py)', async () => {
    const r = await run('bash', [`${ROOT}/bench/run.sh`, '--only', 'metrics', '--rounds', '1', '--agent-entries', '200', '--root', `${dir}/metrics`], { cwd: ROOT });
    expectDone(r, /Scrapes while it ran: \d+ .*errors: 0/);
  }, LONG);

  it('smb.py', async () => {
    const r = await run('python3', [`${ROOT}/bench/smb.py`, '--big-mib', '1', '--files', '10', '--repeat', '1', '--root', `${dir}/smb`], { cwd: ROOT });
    expectDone(r, /del 10 files/);
  }, LONG);
});
