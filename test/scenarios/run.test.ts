import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { TestDaemon, eventually, run, type RunResult } from '../helpers.js';

/**
 * nas run: an unmodified command works at <mnt>/demo in its own branch (a private mount and PID namespace),
 * as an unprivileged user, and its work comes back as an Agent PR. Real namespaces, real processes.
 */
const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

describe('nas run', () => {
  let d: TestDaemon;
  /** A directory every user may write: markers a test and a run's command pass between them. */
  let shared: string;
  const env = () => ({ NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' });
  const nasRun = (...args: string[]): Promise<RunResult> => run(process.execPath, [CLI, '--socket', d.socket, 'run', ...args], { env: env() });
  /** The nas CLI as the command inside a run calls it (through the run's own socket, from its environment). */
  const nasInside = `${process.execPath} ${CLI}`;
  const runJson = async (...args: string[]) => {
    const r = await nasRun('--json', ...args);
    if (r.stdout.trim() === '') throw new Error(`nas run ${args.join(' ')} printed nothing (${r.code}): ${r.stderr}`);
    return { code: r.code, stderr: r.stderr, out: JSON.parse(r.stdout) };
  };
  /** Start nas run without waiting for it, to signal it. */
  const startRun = (...args: string[]): ChildProcess =>
    spawn(process.execPath, [CLI, '--socket', d.socket, 'run', '--json', ...args], { env: { ...process.env, ...env() }, stdio: ['ignore', 'pipe', 'pipe'] });
  const outcome = (child: ChildProcess) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (c) => (stdout += c));
      child.stderr!.on('data', (c) => (stderr += c));
      child.once('close', (code) => resolve({ code, stdout, stderr }));
    });
  const marker = async (name: string) => (await eventually(async () => fs.readFile(`${shared}/${name}`, 'utf8').then((text) => ({ text }), () => null), `marker ${name}`)).text;
  /** Host pids of processes whose command line is exactly this (a run's own pids are its namespace's). */
  const pidsOf = async (cmdline: string) => {
    const pids: number[] = [];
    for (const name of await fs.readdir('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      const text = await fs.readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
      if (text.split('\0').filter(Boolean).join(' ') === cmdline) pids.push(Number(name));
    }
    return pids;
  };
  const branches = async () => (await d.nasJson<{ name: string }[]>('branch', 'list', 'demo')).map((b) => b.name).sort();
  const runs = async () => d.nasJson<{ id: string; state: string; signal?: string; exit?: number; intent?: string }[]>('run', 'list', 'demo');

  beforeAll(async () => {
    d = await TestDaemon.withBranch('draft');
    shared = `${d.dir}/shared`;
    await fs.mkdir(shared);
    await fs.chmod(shared, 0o1777);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('gives the command its branch at the Home path; main is unchanged, and outside the run the path is still main', async () => {
    const child = startRun('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `echo from-the-run > outbox/x.md && id -un > ${shared}/who && pwd > ${shared}/cwd && ` +
      `((echo no > $NAS_MOUNT/demo@main/outbox/y.md) 2> ${shared}/main-err || true) && ` +
      `echo "$NAS_RUN $NAS_HOME $NAS_BRANCH" > ${shared}/env && touch ${shared}/written && ` +
      `while [ ! -e ${shared}/go-on ]; do sleep 0.05; done`);
    const done = outcome(child);
    await marker('written');
    // Outside the run, the same path is main: read-only, without the run's file.
    await expect(fs.access(d.path('demo', 'outbox/x.md'))).rejects.toThrow(/ENOENT/);
    await expect(fs.writeFile(d.path('demo', 'outbox/z.md'), 'z')).rejects.toThrow(/EROFS/);
    await fs.writeFile(`${shared}/go-on`, '');
    const r = await done;
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ state: 'exited', exit: 0, user: 'nobody', pr: null });
    expect((await fs.readFile(`${shared}/who`, 'utf8')).trim()).toBe('nobody');
    expect((await fs.readFile(`${shared}/cwd`, 'utf8')).trim()).toBe(d.path('demo'));
    // The kernel refuses nobody before nasd would (root gets EROFS, as outside a run).
    expect(await fs.readFile(`${shared}/main-err`, 'utf8')).toMatch(/Permission denied|Read-only file system/);
    expect((await fs.readFile(`${shared}/env`, 'utf8')).trim()).toBe(`${out.run} demo ${out.branch}`);
    // The commit is on the run's branch, with the run's trailer; main did not move.
    expect((await d.gitBlob(`${out.branch}:outbox/x.md`)).toString()).toBe('from-the-run\n');
    expect((await d.git('log', '-1', '--format=%B', out.branch)).stdout).toContain(`Nas-Run: ${out.run}`);
    expect((await d.git('cat-file', '-e', 'main:outbox/x.md')).code).not.toBe(0);
    // The lease died with the run; the branch stays for inspection.
    const leases = await d.nasJson<{ branch: string; status: string }[]>('lease', 'list', 'demo');
    expect(leases.filter((l) => l.branch === out.branch).map((l) => l.status)).toEqual(['revoked']);
    expect(await branches()).toContain(out.branch);
    expect((await runs()).find((x) => x.id === out.run)).toMatchObject({ state: 'exited', exit: 0 });
  });

  it('proposes the work with the intent, the run id and the exit status, and says what became of the PR', async () => {
    const { code, out, stderr } = await runJson('demo', '--user', 'nobody', '--intent', 'release notes', '--', 'sh', '-c',
      `cat $NAS_MOUNT/demo@main/AGENTS.md > /dev/null && echo notes > outbox/notes.md`);
    expect(code, stderr).toBe(0);
    expect(out.pr).toMatchObject({ state: 'merged' });
    expect((await d.gitBlob('main:outbox/notes.md')).toString()).toBe('notes\n');
    const merge = (await d.git('log', '-1', '--format=%B', 'main')).stdout;
    expect(merge).toContain(`Nas-Run: ${out.run}`);
    expect(merge).toContain('Nas-Exit: 0');
    expect(merge).toContain('Nas-Intent: release notes');
    expect(merge).toContain('Nas-Principal: nobody');
    // What the run read on main is in its manifest (it is the run's: its pid is in the run's namespace).
    const pr = await d.nasJson<{ reads: string }>('pr', 'show', 'demo', String(out.pr.id));
    expect(pr.reads).toMatch(/ AGENTS\.md$/m);
    const human = await nasRun('demo', '--user', 'nobody', '--intent', 'more notes', '--', 'sh', '-c', 'echo more > outbox/more.md');
    expect(human.code).toBe(0);
    expect(human.stderr).toMatch(/run r[0-9a-f]{8} exited 0; PR \d+ merged by policy/);
    // It read nothing through the mount, but its briefing handed it AGENTS.md and MEMORY.md: they are its reads.
    const humanPr = Number(/PR (\d+) merged/.exec(human.stderr)![1]);
    const shown = await d.nas('pr', 'show', 'demo', String(humanPr));
    expect(shown.stdout).toMatch(/^reads: 2 path\(s\): AGENTS\.md, memory\/MEMORY\.md; digest sha256:/m);
  });

  it("lists a run with its PR's state now: waiting when the run ended, merged once approved", async () => {
    // The run reads untrusted input: its PR waits for the owner.
    const { code, out, stderr } = await runJson('demo', '--user', 'nobody', '--intent', 'answer the inbox', '--', 'sh', '-c',
      'cat inbox/README.md > /dev/null && echo answer > outbox/answer.md');
    expect(code, stderr).toBe(0);
    expect(out.pr).toMatchObject({ state: 'waiting' });
    const listed = async () => (await d.nasJson<{ id: string; pr?: number; pr_state?: string }[]>('run', 'list', 'demo')).find((r) => r.id === out.run);
    expect(await listed()).toMatchObject({ pr: out.pr.id, pr_state: 'waiting' });
    expect((await d.nas('pr', 'approve', 'demo', String(out.pr.id))).code).toBe(0);
    expect(await listed()).toMatchObject({ pr: out.pr.id, pr_state: 'merged' });
    const text = await d.nas('run', 'list', 'demo');
    expect(text.stdout.split('\n').find((line) => line.startsWith(out.run))).toContain(`${out.pr.id} merged`);
  });

  it('keeps a run from reaching outside its branch: no writes elsewhere, no approval, no other run\'s branch', async () => {
    const first = startRun('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `echo secret > outbox/secret.md && echo scratch > workspace/secret.txt && echo $NAS_BRANCH > ${shared}/first && while [ ! -e ${shared}/first-done ]; do sleep 0.05; done`);
    const firstDone = outcome(first);
    const firstBranch = (await marker('first')).trim();
    const ownerToken = (await fs.readFile(`${d.state}/owner.token`, 'utf8')).trim();
    const mainHead = (await d.git('rev-parse', 'main')).stdout.trim();
    const { code, out, stderr } = await runJson('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `cd $NAS_MOUNT; ` +
      // History views show any commit, another run's too: closed to runs.
      `cat demo:${mainHead.slice(0, 12)}/AGENTS.md > /dev/null 2> ${shared}/history-err; ` +
      `(echo x > demo@draft/outbox/x.md) 2> ${shared}/draft-err; ` +
      `cat demo@${firstBranch}/outbox/secret.md 2> ${shared}/other-err > ${shared}/other-out; ` +
      `ls demo@${firstBranch} > /dev/null 2>> ${shared}/other-err; ` +
      `cat demo@${firstBranch}/workspace/secret.txt 2>> ${shared}/other-err >> ${shared}/other-out; ` +
      `cat ${d.state}/homes/demo.git/nas/branches/${firstBranch}/upper/outbox/secret.md 2> ${shared}/store-err >> ${shared}/other-out; ` +
      `ls ${d.state} 2>> ${shared}/store-err >> ${shared}/other-out; ` +
      `echo mine > demo/outbox/mine.md; ` +
      `${nasInside} propose demo/$NAS_BRANCH --into main --intent "from inside" > ${shared}/propose 2>&1; ` +
      `${nasInside} pr approve demo 1 > ${shared}/approve 2>&1; echo $? >> ${shared}/approve; ` +
      // Even with the owner's token, and at nasd's socket path, a run reaches only its own socket, where no owner action is taken.
      `NAS_OWNER_TOKEN=${ownerToken} NAS_SOCKET=${d.socket} ${nasInside} pr approve demo 1 > ${shared}/main-socket 2>&1; true`);
    await fs.writeFile(`${shared}/first-done`, '');
    expect((await firstDone).code).toBe(0);
    expect(code, stderr).toBe(0);
    expect(await fs.readFile(`${shared}/draft-err`, 'utf8')).toMatch(/Permission denied/);
    expect(await fs.readFile(`${shared}/history-err`, 'utf8')).toMatch(/Permission denied/);
    expect(await fs.readFile(`${shared}/other-out`, 'utf8')).toBe('');
    expect(await fs.readFile(`${shared}/other-err`, 'utf8')).toMatch(/Permission denied[\s\S]*Permission denied[\s\S]*Permission denied/);
    // Nor around the views: the Store (its upper directories, its objects) is hidden inside a run.
    expect(await fs.readFile(`${shared}/store-err`, 'utf8')).toMatch(/Permission denied[\s\S]*Permission denied/);
    // It can propose its own branch with its lease, through its own socket, but not approve anything.
    expect(await fs.readFile(`${shared}/propose`, 'utf8')).toMatch(/PR \d+/);
    expect(await fs.readFile(`${shared}/approve`, 'utf8')).toMatch(/owner action[\s\S]*\n1\n$/);
    expect(await fs.readFile(`${shared}/main-socket`, 'utf8')).toMatch(/owner action/);
    // Its PR merged by policy: the work is on main, and the run's branch went at the run's end.
    expect(await fs.readFile(`${shared}/propose`, 'utf8')).toMatch(/PR \d+ \(.*\): merged/);
    expect((await d.gitBlob('main:outbox/mine.md')).toString()).toBe('mine\n');
    expect(out.branch_removed).toMatch(/its work is on main/);
    expect((await d.git('cat-file', '-e', 'draft:outbox/x.md')).code).not.toBe(0);
  });

  it('keeps a run out of a branch its user holds a lease on: it reads only its own branch and main, all recorded', async () => {
    expect((await d.nas('branch', 'create', 'demo/elsewhere')).code).toBe(0);
    expect((await d.nas('lease', 'issue', 'demo/elsewhere', '--principal', 'nobody', '--ttl', '1h')).code).toBe(0);
    const inbox = d.path('demo@elsewhere', 'inbox/README.md');
    // Outside a run the lease's principal reads that branch's inbox: it is theirs.
    expect((await run('runuser', ['-u', 'nobody', '--', 'cat', inbox])).code).toBe(0);
    const { code, out, stderr } = await runJson('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `cat ${inbox} > ${shared}/elsewhere-out 2> ${shared}/elsewhere-err; ` +
      `ls ${d.path('demo@elsewhere')} >> ${shared}/elsewhere-out 2>> ${shared}/elsewhere-err; ` +
      `cat $NAS_MOUNT/demo@main/AGENTS.md > /dev/null && cat inbox/README.md > /dev/null && echo read-home >> ${shared}/elsewhere-out; ` +
      // A run that changed nothing leaves no branch (nor its manifest): this one writes.
      'echo read > outbox/read.md');
    expect(code, stderr).toBe(0);
    expect(await fs.readFile(`${shared}/elsewhere-out`, 'utf8')).toBe('read-home\n');
    expect(await fs.readFile(`${shared}/elsewhere-err`, 'utf8')).toMatch(/Permission denied[\s\S]*Permission denied/);
    // What it could read, it read on the record: main's AGENTS.md and its own inbox are in its manifest.
    const reads = await fs.readFile(`${d.state}/homes/demo.git/nas/branches/${out.branch}/reads.jsonl`, 'utf8');
    expect(reads).toMatch(/AGENTS\.md/);
    expect(reads).toMatch(/inbox\/README\.md/);
  });

  it('ends a run whose clean-up fails: lease revoked and end recorded first, the clean-up done on a later pass', async () => {
    const child = startRun('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `echo "$NAS_RUN $NAS_LEASE" > ${shared}/stuck && while [ ! -e ${shared}/stuck-go ]; do sleep 0.05; done`);
    const done = outcome(child);
    const [id, token] = (await marker('stuck')).trim().split(' ');
    // The run's directory cannot be removed: a file in it is immutable (chattr +i; even root cannot unlink it).
    const dir = `${d.dir}/runs/${id}`;
    await fs.writeFile(`${dir}/pinned`, '');
    const pinned = await run('chattr', ['+i', `${dir}/pinned`]);
    try {
      expect(pinned.code, pinned.stderr).toBe(0);
      await fs.writeFile(`${shared}/stuck-go`, '');
      const r = await done;
      expect(r.code, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout);
      expect(out).toMatchObject({ run: id, state: 'exited', exit: 0 });
      expect((await runs()).find((x) => x.id === id)).toMatchObject({ state: 'exited' });
      const leases = await d.nasJson<{ branch: string; status: string }[]>('lease', 'list', 'demo');
      expect(leases.filter((l) => l.branch === out.branch).map((l) => l.status)).toEqual(['revoked']);
      const propose = await d.nasWith({ NAS_LEASE: token, owner: false }, 'propose', `demo/${out.branch}`, '--into', 'main', '--intent', 'late');
      expect(propose.stderr).toMatch(/is revoked/);
      expect(d.log).toMatch(/cannot clean up after a run/);
      expect((await fs.stat(dir)).isDirectory()).toBe(true);
    } finally {
      await run('chattr', ['-i', `${dir}/pinned`]);
    }
    // Removable again: the periodic pass (every 5 s) cleans up.
    await eventually(async () => fs.access(dir).then(() => false, () => true), 'the run directory to go', 20_000);
  });

  it("shows a failed run's exit status on its PR, in nas pr list and in the inbox, and holds the PR for a person", async () => {
    const { code, out } = await runJson('demo', '--user', 'nobody', '--intent', 'half done', '--', 'sh', '-c', 'echo half > outbox/half.md; exit 3');
    expect(code).toBe(3);
    expect(out.pr).toMatchObject({ state: 'waiting' });
    const id = String(out.pr.id);
    const shown = await d.nas('pr', 'show', 'demo', id);
    expect(shown.stdout).toMatch(/^run exit: 3 \(FAILED: the run's command did not succeed; its work may be unfinished\)$/m);
    expect(shown.stdout).toMatch(/the run's command failed \(exit 3\): its work may be unfinished/);
    const row = (text: string) => text.split('\n').find((line) => new RegExp(`^(demo\\s+)?${id}\\s`).test(line)) ?? '';
    expect(row((await d.nas('pr', 'list', 'demo')).stdout)).toMatch(/\swaiting\s+3 FAILED\s/);
    expect(row((await d.nas('pr', 'inbox')).stdout)).toMatch(/\swaiting\s+3 FAILED\s/);
    expect((await d.nasJson<{ id: number; exit?: string; run_failed?: boolean }[]>('pr', 'list', 'demo')).find((p) => p.id === out.pr.id))
      .toMatchObject({ exit: '3', run_failed: true });
    expect((await d.nasJson<{ id: number; exit?: string; run_failed?: boolean }[]>('pr', 'inbox')).find((p) => p.id === out.pr.id))
      .toMatchObject({ exit: '3', run_failed: true });
    // A run that succeeded says so, and is not marked.
    const ok = await runJson('demo', '--user', 'nobody', '--intent', 'all done', '--', 'sh', '-c', 'echo done > outbox/done-ok.md');
    expect((await d.nas('pr', 'show', 'demo', String(ok.out.pr.id))).stdout).toMatch(/^run exit: 0 \(succeeded\)$/m);
    expect((await d.nasJson<{ id: number; exit?: string; run_failed?: boolean }[]>('pr', 'list', 'demo')).find((p) => p.id === ok.out.pr.id))
      .toEqual(expect.objectContaining({ exit: '0' }));
    expect((await d.nas('pr', 'reject', 'demo', id, '--why', 'unfinished')).code).toBe(0);
  });

  it('passes the exit status through, and a signal reaches the whole process tree', async () => {
    const failed = await runJson('demo', '--user', 'nobody', '--intent', 'will fail', '--', 'sh', '-c', 'echo partial > outbox/partial.md; exit 7');
    expect(failed.code).toBe(7);
    expect(failed.out).toMatchObject({ state: 'exited', exit: 7 });
    // A failed command's work is still proposed, with its status in the PR.
    expect(failed.out.pr).not.toBeNull();

    const child = startRun('demo', '--user', 'nobody', '--intent', 'killed', '--', 'sh', '-c',
      `echo before > outbox/before.md; (sleep 301; echo late > ${shared}/late) & touch ${shared}/grandchild; sleep 300`);
    const done = outcome(child);
    await marker('grandchild');
    const grandchild = await eventually(async () => (await pidsOf('sleep 301'))[0], 'the grandchild');
    process.kill(child.pid!, 'SIGTERM');
    const r = await done;
    expect(r.code).toBe(143);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ state: 'killed', signal: 'SIGTERM', pr: null });
    // The background process of the command's shell went too; what was written before is committed.
    await eventually(async () => !(await fs.access(`/proc/${grandchild}`).then(() => true, () => false)), 'the grandchild to end');
    expect((await d.gitBlob(`${out.branch}:outbox/before.md`)).toString()).toBe('before\n');
    expect((await d.git('cat-file', '-e', 'main:outbox/before.md')).code).not.toBe(0);
  });

  it('passes SIGINT from outside the terminal on to the run', async () => {
    const child = startRun('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c', `touch ${shared}/interrupt-me; sleep 304`);
    const done = outcome(child);
    await marker('interrupt-me');
    await eventually(async () => (await pidsOf('sleep 304'))[0], 'the command');
    process.kill(child.pid!, 'SIGINT');
    const r = await done;
    expect(r.code).toBe(130);
    expect(JSON.parse(r.stdout)).toMatchObject({ state: 'killed', signal: 'SIGINT' });
  });

  it('stops a command that ignores SIGTERM when asked a second time', async () => {
    const child = startRun('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c', `trap '' TERM; touch ${shared}/deaf; sleep 303`);
    const done = outcome(child);
    await marker('deaf');
    await eventually(async () => (await pidsOf('sleep 303'))[0], 'the command');
    process.kill(child.pid!, 'SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    expect((await pidsOf('sleep 303')).length).toBe(1);
    process.kill(child.pid!, 'SIGTERM');
    const r = await done;
    expect(r.code, r.stderr).toBe(137);
    expect(JSON.parse(r.stdout)).toMatchObject({ state: 'killed', signal: 'SIGKILL' });
  });

  it('commits and records a run whose nas run is killed with SIGKILL, and stops its processes', async () => {
    const child = startRun('demo', '--user', 'nobody', '--intent', 'sigkill', '--', 'sh', '-c',
      `echo kept > outbox/kept.md; touch ${shared}/victim; sleep 302`);
    const done = outcome(child);
    await marker('victim');
    const victim = await eventually(async () => (await pidsOf('sleep 302'))[0], 'the command');
    process.kill(child.pid!, 'SIGKILL');
    await done;
    await eventually(async () => !(await fs.access(`/proc/${victim}`).then(() => true, () => false)), 'the command to end');
    const record = await eventually(async () => (await runs()).find((x) => x.intent === 'sigkill' && x.state === 'killed'), 'the run recorded killed', 15_000);
    expect(record.signal).toBe('SIGKILL');
    const branch = `run-${record.id}`;
    expect((await d.gitBlob(`${branch}:outbox/kept.md`)).toString()).toBe('kept\n');
  });

  it('runs attempts from one fork point; pick merges one and sends the others to the recycle area', async () => {
    const { code, out } = await runJson('demo', '--user', 'nobody', '--attempts', '3', '--intent', 'pick me', '--', 'sh', '-c',
      'echo "$NAS_RUN" > outbox/attempt.md');
    expect(code).toBe(0);
    expect(out.runs).toHaveLength(3);
    expect(out.runs.every((r: { pr: unknown; state: string }) => r.pr === null && r.state === 'exited')).toBe(true);
    const bases = await Promise.all(out.runs.map(async (r: { branch: string }) => (await d.git('merge-base', r.branch, 'main')).stdout.trim()));
    expect(new Set(bases).size).toBe(1);
    const chosen = out.runs[1];
    const picked = await d.nasJson('run', 'pick', 'demo', out.task, chosen.run);
    expect(picked.pr.state).toBe('merged');
    expect(picked.discarded.sort()).toEqual([out.runs[0].run, out.runs[2].run].sort());
    expect((await d.gitBlob('main:outbox/attempt.md')).toString()).toBe(`${chosen.run}\n`);
    const trash = await d.nasJson<{ path: string; branch: string }[]>('trash', 'list', 'demo');
    for (const loser of [out.runs[0], out.runs[2]]) expect(trash).toContainEqual(expect.objectContaining({ path: 'outbox/attempt.md', branch: loser.branch }));
    // The chosen attempt's work is on main: its branch goes too (a run's merged branch leaves at once).
    const left = await branches();
    expect(left).not.toContain(chosen.branch);
    expect(left).not.toContain(out.runs[0].branch);
  });

  it('runs make and git clone in the run\'s workspace/', async () => {
    const origin = `${shared}/origin.git`;
    await run('git', ['init', '-q', '--bare', origin]);
    const seed = `${d.dir}/seed`;
    await run('git', ['init', '-q', seed]);
    await fs.writeFile(`${seed}/in.txt`, 'source\n');
    await fs.writeFile(`${seed}/Makefile`, 'out.txt: in.txt\n\tcp in.txt out.txt\n');
    for (const step of [['add', '-A'], ['-c', 'user.name=t', '-c', 'user.email=t@x', 'commit', '-qm', 'seed'], ['push', '-q', origin, 'HEAD:main']]) {
      expect((await run('git', step, { cwd: seed })).code).toBe(0);
    }
    // git serves a repository to its owner only: the run's user owns this one.
    await run('chown', ['-R', 'nobody', origin]);
    const { code, out, stderr } = await runJson('demo', '--user', 'nobody', '--no-propose', '--cwd', 'workspace', '--', 'sh', '-c',
      `git clone -q -b main ${origin} src && cd src && make -s && cat out.txt > ${shared}/made`);
    expect(code, stderr).toBe(0);
    expect(await fs.readFile(`${shared}/made`, 'utf8')).toBe('source\n');
    // Scratch: on the branch's disk, never committed.
    expect((await d.git('ls-tree', '-r', '--name-only', out.branch)).stdout).not.toMatch(/workspace\//);
  });

  it('puts the briefing in NAS_BRIEFING_FILE; nas hook session-start prints the start and on-demand paths, not contents', async () => {
    // An item that waits in main's inbox: the briefing, made as the run's user once its lease applies, lists it.
    await d.pushToMain({ 'inbox/waiting-task.md': 'Do the waiting task.\n' }, 'an inbox item');
    await eventually(async () => (await fs.readFile(d.path('demo', 'inbox/waiting-task.md'), 'utf8').catch(() => '')) !== '', 'main to show the inbox item');
    const { code, stderr } = await runJson('demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `echo 'Please summarise.' > inbox/hook-task.md && cat "$NAS_BRIEFING_FILE" > ${shared}/briefing && ` +
      `${nasInside} hook session-start > ${shared}/hook && ${nasInside} hook session-start --max-tokens 800 > ${shared}/hook-capped && ` +
      `${nasInside} context > ${shared}/context`);
    expect(code, stderr).toBe(0);
    const agents = (await fs.readFile(d.path('demo', 'AGENTS.md'), 'utf8')).split('\n')[0];
    expect(await fs.readFile(`${shared}/briefing`, 'utf8')).toContain(agents);
    expect(await fs.readFile(`${shared}/briefing`, 'utf8')).toMatch(/inbox\/waiting-task\.md/);
    const hook = await fs.readFile(`${shared}/hook`, 'utf8');
    // Paths where the run sees its branch (the Home's ordinary path), never the files' contents.
    expect(hook).not.toContain(agents);
    const [start, demand] = hook.split('\n\n');
    expect(start.split('\n')).toEqual([expect.stringMatching(/^READ-ON-START/), `${d.mnt}/demo/AGENTS.md`, `${d.mnt}/demo/memory/MEMORY.md`]);
    expect(demand).toMatch(/^READ-ON-DEMAND/);
    expect(demand.split('\n')).toContain(`${d.mnt}/demo/inbox/hook-task.md  [untrusted input]`);
    expect(hook).not.toContain('Please summarise.');
    expect(hook).toMatch(new RegExp(`Home "demo" at ${d.mnt}/demo, on branch run-r[0-9a-f]{8}`));
    // A hook configured for the old briefing (--max-tokens) prints the same lists.
    expect(await fs.readFile(`${shared}/hook-capped`, 'utf8')).toBe(hook);
    // nas context needs no role inside a run either: the same lists, where the run sees them.
    expect(await fs.readFile(`${shared}/context`, 'utf8')).toBe(`${hook.split('\n---\n')[0]}`);
  });

  it("passes the run a short allow-list of root's environment, and the variables named with --env", async () => {
    const r = await run(process.execPath, [CLI, '--socket', d.socket, 'run', 'demo', '--user', 'nobody', '--no-propose', '--env', 'AGENT_API_KEY',
      '--', 'sh', '-c', `env > ${shared}/run-env`], { env: { ...env(), ROOT_SECRET: 'root only', AGENT_API_KEY: 'for the agent', LC_ALL: 'C', TERM: 'xterm-test' } });
    expect(r.code, r.stderr).toBe(0);
    const seen = new Map((await fs.readFile(`${shared}/run-env`, 'utf8')).split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    expect(seen.get('ROOT_SECRET')).toBeUndefined();
    expect(seen.get('NAS_OWNER_TOKEN_FILE')).toBeUndefined();
    expect(seen.get('AGENT_API_KEY')).toBe('for the agent');
    expect([seen.get('LC_ALL'), seen.get('TERM'), seen.get('USER'), seen.get('HOME')]).toEqual(['C', 'xterm-test', 'nobody', '/nonexistent']);
    expect(seen.get('PATH')).toBeTruthy();
    expect(seen.get('NAS_RUN')).toMatch(/^r[0-9a-f]{8}$/);
    // Only what is listed is passed: the variables a run gets from root are these, whatever else root had.
    const fromRoot = [...seen.keys()].filter((k) => !k.startsWith('NAS_') && !['HOME', 'USER', 'LOGNAME', 'SHELL', 'PWD', 'SHLVL', '_', 'OLDPWD'].includes(k));
    for (const k of fromRoot) expect(['PATH', 'TERM', 'COLORTERM', 'NO_COLOR', 'LANG', 'LANGUAGE', 'TZ', 'AGENT_API_KEY'].includes(k) || k.startsWith('LC_'), k).toBe(true);
  });

  it('refuses bad input with a clear message and exit 2, creating nothing', async () => {
    const before = { branches: await branches(), runs: (await runs()).length };
    await fs.writeFile(`${shared}/not-executable.sh`, '#!/bin/sh\necho hi\n', { mode: 0o644 });
    // Executable, but in a directory nobody may enter.
    const hidden = `${d.dir}/hidden`;
    await fs.mkdir(hidden, { mode: 0o700 });
    await fs.writeFile(`${hidden}/tool.sh`, '#!/bin/sh\necho hi\n', { mode: 0o755 });
    const cases: [string[], RegExp][] = [
      [['nohome', '--user', 'nobody', '--', 'true'], /no Home named "nohome"/],
      [['demo', '--user', 'no-such-user', '--', 'true'], /no local user "no-such-user"/],
      [['demo', '--', 'true'], /--user/],
      [['demo', '--user', 'nobody', '--ttl', 'soon', '--', 'true'], /invalid duration "soon"/],
      [['demo', '--user', 'nobody', '--budget', '5X', '--', 'true'], /--budget must be a size/],
      [['demo', '--user', 'nobody', '--attempts', '0', '--', 'true'], /--attempts must be a whole number from 1 to 16/],
      [['demo', '--user', 'nobody', '--', 'no-such-command-xyz'], /command not found: no-such-command-xyz/],
      [['demo', '--user', 'nobody', '--', `${shared}/not-executable.sh`], /not executable by nobody/],
      [['demo', '--user', 'nobody'], /name the command to run after --/],
      [['demo', '--user', 'nobody', '--cwd', 'no/such/dir', '--', 'true'], /--cwd no\/such\/dir: no such directory/],
      [['demo', '--user', 'nobody', '--', `${hidden}/tool.sh`], /not executable by nobody/],
    ];
    for (const [args, message] of cases) {
      const r = await nasRun(...args);
      expect([args.join(' '), r.code]).toEqual([args.join(' '), 2]);
      expect(r.stderr).toMatch(message);
    }
    expect(await branches()).toEqual(before.branches);
    expect((await runs()).length).toBe(before.runs);
  });

  it('tells a run in flight that nasd restarted, and keeps what it committed', async () => {
    const child = startRun('demo', '--user', 'nobody', '--intent', 'restart', '--', 'sh', '-c',
      `echo early > outbox/early.md; sync; touch ${shared}/restart-ready; sleep 300`);
    const done = outcome(child);
    await marker('restart-ready');
    const branch = await eventually(async () => (await runs()).find((x) => x.state === 'running'), 'the run to be listed');
    await d.sync(`demo/run-${branch.id}`);
    await d.stop();
    d = await d.restart();
    const r = await done;
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/nasd stopped or restarted while run r[0-9a-f]{8} was in flight/);
    expect((await runs()).find((x) => x.id === branch.id)?.state).toBe('interrupted');
    expect((await d.gitBlob(`run-${branch.id}:outbox/early.md`)).toString()).toBe('early\n');
  });
});
