import fs from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { ApiError, type Call } from '../../api/client.js';
import type { RunStart, RunView } from '../../api/types.js';
import type { Account } from '../../util/accounts.js';
import { printable } from '../../util/display.js';
import { Usage, type Args } from '../args.js';
import { command, type Command, type Output } from '../command.js';
import { table } from '../format.js';
import { RunProcess, type Ended } from '../run/launcher.js';
import { parseAttempts, parseSize, resolveProgram, runAccount } from '../run/inputs.js';

export const help = {
  run:
    'usage: nas run <role> [--user NAME] [--intent TEXT] [--ttl 48h] [--budget 50M] [--cwd PATH] [--attempts N]\n' +
    '              [--env NAME[,NAME]]... [--egress] [--propose | --no-propose] [--propose-on-failure] [--json] -- COMMAND [ARG]...\n' +
    '       nas run list <role>\n       nas run pick <role> <task> <run>\n\n' +
    'Runs COMMAND in its own branch of the Home: a new branch forked from main, a lease for the user on it\n' +
    '(write, propose:main, the TTL and budget), and a private mount namespace in which /agents/<role> is that\n' +
    'branch, writable (main stays at /agents/<role>@main, read-only). The command runs as --user (default: the\n' +
    'user sudo was called by; never root), unable to make namespaces, in the Home (or --cwd inside it), with NAS_RUN, NAS_HOME,\n' +
    'NAS_BRANCH, NAS_LEASE, NAS_SOCKET and NAS_BRIEFING_FILE set. Of the caller\'s environment only PATH, TERM,\n' +
    'COLORTERM, NO_COLOR, LANG, LANGUAGE, LC_* and TZ reach it, and the variables named with --env (an API key).\n' +
    'Its network is its own, loopback only (it reaches nothing outside the run, not even the host\'s 127.0.0.1),\n' +
    'unless --egress: the lease then has the egress scope and the run the host\'s network. Its PR records which.\n' +
    'nas run itself needs root (sudo nas run ...).\n\n' +
    'When the command ends, what it wrote is committed; with --intent the branch is proposed into main (unless\n' +
    '--no-propose; a run ended by a signal only with --propose-on-failure) and the PR\'s state is printed; the\n' +
    'lease is revoked; the branch stays until its TTL, unless its PR merged or it changed nothing (then it goes at\n' +
    'once). The exit status is the command\'s (128+N for signal N).\n' +
    'SIGTERM and SIGHUP to nas run reach every process of the run (SIGINT too, unless the terminal sent it to\n' +
    'the run itself); a second one sends SIGKILL. --attempts N starts N runs of the command from the same main\n' +
    'commit as one task, proposes none of them, and nas run pick merges the one chosen and sends the others\'\n' +
    'work to the recycle area. --budget takes 50M, 2G, 512k or bytes (binary units).\n',
};

/** How a run ended, for a person: its state and what became of its work. */
function summary(r: RunView): string {
  const how = r.state === 'failed-to-start' ? 'did not start' : r.signal ? `was ended by ${r.signal}` : r.state === 'interrupted' ? 'was interrupted' : `exited ${r.exit}`;
  let work = `its work is on ${r.home}@${r.branch}`;
  if (r.pr !== undefined) {
    const state = r.pr_state === 'merged' ? 'merged by policy'
      : r.pr_state === 'waiting' ? `waiting at the Human Gate (${(r.pr_reasons ?? []).join('; ') || 'see nas pr show'}); approve with: nas pr approve ${r.home} ${r.pr}`
        : `${r.pr_state}${r.pr_reasons?.length ? ` (${r.pr_reasons.join('; ')})` : ''}; see nas pr show ${r.home} ${r.pr}`;
    work = `PR ${r.pr} ${state}${r.branch_removed ? ` (${r.branch_removed})` : ''}`;
  } else if (r.state === 'failed-to-start') work = 'nothing was kept';
  else if (r.branch_removed) work = r.branch_removed;
  return `nas run: run ${r.id}${r.task ? ` (task ${r.task})` : ''} ${how}; ${work}${r.note ? `\n  ${r.note}` : ''}\n`;
}

const asJson = (r: RunView) => ({
  run: r.id, ...(r.task ? { task: r.task } : {}), home: r.home, branch: r.branch, view: `${r.home}@${r.branch}`, user: r.user,
  state: r.state, exit: r.exit ?? null, signal: r.signal ?? null, egress: r.egress ?? null,
  pr: r.pr !== undefined ? { id: r.pr, state: r.pr_state, reasons: r.pr_reasons ?? [] } : null, note: r.note ?? null,
  branch_removed: r.branch_removed ?? null,
});

/**
 * What of the caller's environment reaches the run: where programs are, and how to print (terminal, language,
 * time zone). nas run is called as root: the rest of its environment (tokens, keys, SSH_AUTH_SOCK, root's own
 * settings) stays out, unless named with --env.
 */
const PASSED_ENV = ['PATH', 'TERM', 'COLORTERM', 'NO_COLOR', 'LANG', 'LANGUAGE', 'TZ'];

/** The command's environment: the allowed part of the caller's (no owner credential), as the run's user, plus the run's. */
function runEnv(account: Account, start: RunStart, role: string, task: string | undefined, named: string[]): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    const passed = PASSED_ENV.includes(k) || k.startsWith('LC_') || named.includes(k);
    if (passed && !k.startsWith('NAS_') && !k.startsWith('SUDO_')) env[k] = v;
  }
  return {
    ...env, HOME: account.home, USER: account.name, LOGNAME: account.name, SHELL: account.shell,
    NAS_RUN: start.id, NAS_HOME: role, NAS_BRANCH: start.branch, NAS_LEASE: start.token, NAS_SOCKET: start.socket,
    NAS_BRIEFING_FILE: start.briefing, NAS_MOUNT: start.homePath.slice(0, -role.length - 1), ...(task ? { NAS_TASK: task } : {}),
  };
}

interface Plan {
  role: string;
  account: Account;
  command: string[];
  cwd: string;
  attempts: number;
  propose: boolean;
  proposeOnFailure: boolean;
  /** Variables of the caller's environment passed on by name (--env). */
  env: string[];
}

/** Everything nas run checks before nasd makes anything. */
async function plan(args: Args, call: Call): Promise<Plan> {
  const role = args.need(1, '<role>');
  if (!args.rest?.length) throw new Usage('name the command to run after --, e.g. nas run demo -- ./agent.sh');
  if (process.getuid?.() !== 0) throw new Usage('nas run makes a private mount namespace, which needs root: run it with sudo (the command then runs as you)');
  if (args.has('propose') && args.has('no-propose')) throw new Usage('--propose and --no-propose contradict each other');
  const account = await runAccount(args.value('user'));
  const cwd = args.value('cwd') ?? '';
  // Asked only for a relative program path that is not where nas run was called: it may be the Home's.
  const homeDir = async () => `${(await call('status', {}, {})).mount}/${role}${cwd ? `/${cwd}` : ''}`;
  const program = await resolveProgram(args.rest[0], account, homeDir);
  const attempts = parseAttempts(args.value('attempts'));
  // Parallel attempts wait for nas run pick; otherwise an intent means the work is meant for main.
  const propose = attempts === 1 && !args.has('no-propose') && (args.has('propose') || args.value('intent') !== undefined);
  const env = args.list('env').flatMap((names) => names.split(','));
  for (const name of env) if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Usage(`--env takes variable names (--env ANTHROPIC_API_KEY,HTTPS_PROXY), not ${JSON.stringify(name)}`);
  return { role, account, command: [program, ...args.rest.slice(1)], cwd, attempts, propose, proposeOnFailure: args.has('propose-on-failure'), env };
}

/** One run's life from the launcher's side: spawn, attach, wait, finish. */
async function live(call: Call, p: Plan, start: RunStart, task: string | undefined, mainSocket: string, stop: Set<RunProcess>): Promise<{ view: RunView | null; ended: Ended; error?: string }> {
  const proc = new RunProcess(start, p.account, p.command, p.cwd, mainSocket, runEnv(p.account, start, p.role, task, p.env));
  stop.add(proc);
  const ns = await proc.namespace();
  let attached = false;
  if (ns) {
    try {
      await call('attachRun', { role: p.role, id: start.id }, { ns });
      attached = true;
    } catch (err) {
      process.stderr.write(`nas run: ${(err as Error).message}\n`);
    }
  }
  const started = proc.go(attached);
  const watchdog = watchDaemon(start, proc);
  const ended = proc.stoppedEarly ?? (await proc.ended);
  await proc.ended;
  clearInterval(watchdog.timer);
  stop.delete(proc);
  const propose = p.propose && (!ended.signal || p.proposeOnFailure);
  try {
    // The lease goes with the finish call: a PR is filed as the run's principal, not as the owner.
    const view = await call('finishRun', { role: p.role, id: start.id }, { started, exit: ended.code, signal: ended.signal, propose }, { 'x-nas-lease': start.token });
    if (!attached) return { view, ended, error: `run ${start.id} could not be set up (see the message above); nothing was kept` };
    if (!started) return { view, ended, error: `run ${start.id} was stopped by ${ended.signal} before its command started; nothing was kept` };
    return { view, ended, error: watchdog.lost() };
  } catch (err) {
    return { view: null, ended, error: `${watchdog.lost() ?? `cannot finish run ${start.id}: ${(err as Error).message}`}; what it committed stays on ${p.role}@${start.branch}` };
  }
}

/** Whether nas run's process group is its terminal's foreground group (fields 5 and 8 of /proc/self/stat). */
function inTerminalForeground(): boolean {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[5]) > 0 && fields[5] === fields[2];
  } catch {
    return false;
  }
}

/**
 * nasd restarting takes the run's mount with it: the run's files are gone from under it. The run is told (on
 * stderr) and stopped, rather than left failing with ENOTCONN; its committed work stays on its branch.
 */
function watchDaemon(start: RunStart, proc: RunProcess): { timer: NodeJS.Timeout; lost(): string | undefined } {
  let lost: string | undefined;
  const timer = setInterval(async () => {
    if (lost || (await fs.access(start.socket).then(() => true, () => false))) return;
    lost = `nasd stopped or restarted while run ${start.id} was in flight: its files were no longer served, so the run was stopped`;
    process.stderr.write(`nas run: ${lost}\n`);
    proc.signal('SIGTERM');
  }, 1000);
  timer.unref();
  return { timer, lost: () => lost };
}

const runCommand: Command = {
  name: 'run',
  doc: {
    usage: 'nas run <role> [--user U] [--intent T] [--ttl 48h] [--budget 50M] [--cwd P] [--attempts N] [--env NAME]... [--egress] [--propose | --no-propose] [--propose-on-failure] -- CMD...',
    about: 'run a command in its own branch at `/agents/<role>` ([runs](guide.md#runs-nas-run)), loopback-only network ' +
      'unless `--egress` (the lease scope egress: the host\'s network); exit status is the command\'s',
  },
  route: 'startRun',
  flags: ['user', 'intent', 'ttl', 'budget', 'cwd', 'attempts', 'env', 'egress', 'propose', 'no-propose', 'propose-on-failure'],
  async run(args, call): Promise<Output> {
    const p = await plan(args, call);
    const budget = args.value('budget');
    let started;
    try {
      started = await call('startRun', { role: p.role }, {
        user: p.account.name, command: p.command, intent: args.value('intent'), ttl: args.value('ttl'), cwd: p.cwd || undefined,
        budget: budget === undefined ? undefined : parseSize(budget, '--budget'), attempts: p.attempts,
        launcher: process.pid, egress: args.has('egress'),
      });
    } catch (err) {
      // What nasd refuses as input (no such Home, a TTL that does not parse) is a usage mistake: nothing was made.
      if (err instanceof ApiError && (err.status === 400 || err.status === 404)) throw new Usage(err.message);
      throw err;
    }
    const procs = new Set<RunProcess>();
    const forward = (sig: NodeJS.Signals) => () => {
      // A terminal's ^C reaches the whole foreground group, the run included: passing it on would double it.
      if (sig === 'SIGINT' && inTerminalForeground()) return;
      for (const proc of procs) proc.signal(sig);
    };
    const handlers = (['SIGTERM', 'SIGINT', 'SIGHUP'] as const).map((sig) => [sig, forward(sig)] as const);
    for (const [sig, h] of handlers) process.on(sig, h);
    let results;
    try {
      results = await Promise.all(started.runs.map((s) => live(call, p, s, started.task, args.socket, procs)));
    } finally {
      for (const [sig, h] of handlers) process.off(sig, h);
    }
    const stderr = results.map((r) => (r.view ? summary(r.view) : '') + (r.error ? `nas run: ${r.error}\n` : '')).join('');
    const code = results.map((r) => (r.error && r.ended.code === 0 ? 1 : r.ended.code)).find((c) => c !== 0) ?? 0;
    const views = results.map((r) => r.view).filter((v): v is RunView => v !== null);
    const json = started.task ? { task: started.task, runs: views.map(asJson) } : views[0] ? asJson(views[0]) : null;
    const pick = started.task ? `pick one with: nas run pick ${p.role} ${started.task} <run>\n` : '';
    return { stdout: args.json ? JSON.stringify(json, null, 2) + '\n' : '', stderr: printable(stderr + pick), failed: code !== 0, code };
  },
};

export const commands = [
  runCommand,
  command({
    name: 'run list',
    doc: {
      usage: 'nas run list <role>',
      about: 'runs: id, task, branch, user, state, exit, PR (with its state now, not when the run ended; the owner ' +
        'sees all, a run or a lease holder those of its branch, anyone else none)',
    },
    route: 'listRuns',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (runs) => table([['ID', 'TASK', 'BRANCH', 'USER', 'STATE', 'EXIT', 'PR', 'STARTED', 'INTENT'],
      ...runs.map((r) => [r.id, r.task ?? '-', r.branch, r.user, r.state + (r.picked ? ` (${r.picked})` : ''),
        r.signal ?? (r.exit === undefined ? '-' : String(r.exit)), r.pr === undefined ? '-' : `${r.pr} ${r.pr_state}`, r.started, r.intent ?? ''])]),
  }),
  command({
    name: 'run pick',
    doc: {
      usage: 'nas run pick <role> <task> <run>',
      about: 'owner: pick one attempt of a task (merge it, recycle the others; every branch of the task goes)',
    },
    route: 'pickRun',
    request: (args) => ({ params: { role: args.need(2, '<role>'), task: args.need(3, '<task>') }, body: { run: args.need(4, '<run>') } }),
    print: (r) => `picked run ${r.chosen} of task ${r.task}: PR ${r.pr.id} ${r.pr.state}` +
      `${r.discarded.length ? `; discarded into the recycle area: ${r.discarded.join(', ')}` : ''}\n`,
  }),
];
