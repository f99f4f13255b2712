import fs from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import { parseDuration } from '../util/duration.js';
import { validateRelPath } from '../util/names.js';
import { lookupAccount, type Account } from '../util/accounts.js';
import { newRunId, newTaskId, runBranch, RunStore, type RunRecord } from '../run/run-store.js';
import type { PullRequest } from '../merge/pr-store.js';
import type { PickResult, RunStart, RunStarted, RunView } from '../api/types.js';
import type { Credentials, RunCaller } from '../api/credentials.js';
import type { LeaseService } from './leases.js';
import { EGRESS } from '../lease/lease.js';
import type { MemoryService } from './memory.js';
import type { PrService } from './prs.js';
import type { HomeSet } from '../homes/home-set.js';
import type { Branches } from './branches.js';
/** Opens a run's own control socket (the daemon's transport): owned by the run's user, closed when it ends. */
export interface RunSockets {
  open(socket: string, run: RunCaller): Promise<{ close(): Promise<void> }>;
}
import { startTimeOf } from '../util/pid-namespace.js';
import { Beneath } from '../util/beneath.js';
import { mkdirExact } from '../util/exact-mode.js';
import { shownTo } from './shown-to.js';

/**
 * Runs through the control API (`nas run` is the launcher; the daemon keeps the books): a run is a branch
 * forked from main, a lease for the run's user on it (write, propose:main, egress if asked, the run's TTL and budget), its
 * own control socket and briefing, and a record. When the command ends its work is committed, proposed if
 * asked, and the lease revoked. The branch stays for inspection until its TTL, unless its work merged or it
 * never held any: then it goes at once.
 */

export interface RunRequest {
  user: string;
  /** The pid of the nas run that launches it. */
  launcher?: number;
  command?: string[];
  intent?: string;
  ttl?: string;
  cwd?: string;
  budget?: number;
  attempts?: number;
  /** Ask for the lease scope egress: the run gets the host's network rather than loopback only. */
  egress?: boolean;
}

export interface RunEnd {
  /** False when the command never ran (it could not be executed): the branch is removed. */
  started?: boolean;
  exit?: number;
  signal?: string;
  propose?: boolean;
}

const MAX_ATTEMPTS = 16;

/** How a run's command ended, as its PR records it: the signal, else the exit status, else nothing known. */
const exitOf = (end: { exit?: number; signal?: string }): string | undefined => end.signal ?? (end.exit !== undefined ? String(end.exit) : undefined);

export class RunService {
  /** Each live run's socket, to close when it ends. */
  private readonly sockets = new Map<string, { close(): Promise<void> }>();
  /** Each live run's launcher (nas run), to notice when it dies before the run ends. */
  private readonly launchers = new Map<string, { role: string; pid: number; start: string }>();
  /** Runs that ended but whose clean-up (release) failed: the periodic pass tries again. */
  private readonly unreleased = new Set<string>();

  constructor(
    private readonly homes: HomeSet,
    private readonly branches: Branches,
    private readonly leases: LeaseService,
    private readonly prs: PrService,
    private readonly memory: MemoryService,
    private readonly runSockets: RunSockets,
    /** Where runs' sockets and briefings live: `<dir>/<id>/`. */
    private readonly runsDir: string,
    private readonly stateDir: string,
    private readonly log: Logger,
  ) {
    this.runsTree = new Beneath(runsDir);
  }

  /** The runs' directories, removed without following anything a run's user may have put there. */
  private readonly runsTree: Beneath;

  private store(role: string): RunStore {
    const home = this.homes.homeOf(role);
    return new RunStore(home.store, home.identity);
  }

  private async need(role: string, id: string): Promise<RunRecord> {
    const run = await this.store(role).get(id);
    if (!run) throw new UserError(`Home ${role} has no run "${id}"; see nas run list ${role}`, 404);
    return run;
  }

  /** Everything is checked before anything is made: a refused run leaves nothing behind. */
  private async validate(role: string, r: RunRequest): Promise<{ account: Account; ttl: string; attempts: number; cwd: string }> {
    const config = (await this.homes.snapshot(role)).config;
    const account = await lookupAccount(r.user);
    if (!account) throw new UserError(`no local user "${r.user}" (see /etc/passwd); create it with useradd, or name another with --user`);
    if (!r.command?.length || !r.command[0]) throw new UserError('name the command to run after --, e.g. nas run demo -- ./agent.sh');
    const attempts = r.attempts ?? 1;
    if (!Number.isInteger(attempts) || attempts < 1 || attempts > MAX_ATTEMPTS) throw new UserError(`--attempts must be a whole number from 1 to ${MAX_ATTEMPTS}`);
    if (r.budget !== undefined && !(Number.isSafeInteger(r.budget) && r.budget >= 0)) throw new UserError('--budget must be a size in bytes (e.g. 50M, 2G, 1000)');
    const ttl = r.ttl ?? config.limits.branch_ttl_default;
    parseDuration(ttl);
    const cwd = r.cwd ? validateRelPath(r.cwd) : '';
    // Checked on main (where the run forks from), as the view shows it: scratch roots such as workspace/ count.
    const where = cwd ? await this.homes.mounted(role).main.getattr(cwd).catch(() => null) : null;
    if (cwd && !(where && (where.mode & fsConstants.S_IFMT) === fsConstants.S_IFDIR)) {
      throw new UserError(`--cwd ${cwd}: no such directory in Home ${role}`);
    }
    return { account, ttl, attempts, cwd };
  }

  async start(role: string, r: RunRequest): Promise<RunStarted> {
    const { account, ttl, attempts, cwd } = await this.validate(role, r);
    const fork = await this.homes.homeOf(role).mainHead();
    const task = attempts > 1 ? newTaskId() : undefined;
    const runs: RunStart[] = [];
    try {
      for (let i = 0; i < attempts; i++) runs.push(await this.startOne(role, { ...r, task, fork, account, ttl, cwd }));
    } catch (err) {
      // All or nothing: attempts already made are taken back.
      for (const run of runs) await this.undo(role, run.id).catch((e) => this.log.error({ err: e, run: run.id }, 'cannot take back a run'));
      throw err;
    }
    return { ...(task ? { task } : {}), fork, runs };
  }

  private async startOne(
    role: string, r: RunRequest & { task?: string; fork: string; account: Account; ttl: string; cwd: string },
  ): Promise<RunStart> {
    const id = newRunId();
    const branch = runBranch(id);
    const egress = r.egress === true;
    const created = await this.branches.createBranch(role, branch, { at: r.fork, ttl: r.ttl, run: id });
    try {
      const { account } = r;
      const dir = `${this.runsDir}/${id}`;
      const briefing = `${dir}/briefing.md`;
      const socket = `${dir}/nasd.sock`;
      // The lease (a commit) and the run's own directory and socket do not wait for each other.
      const caller = { id, role, branch, user: account.name, uid: account.uid, gid: account.gid };
      const [lease, files] = await Promise.allSettled([
        this.leases.issue(role, branch, { principal: account.name, ttl: r.ttl, scopes: `write,propose:main${egress ? `,${EGRESS}` : ''}`, budget: r.budget }, { owner: true }),
        (async () => {
          // Everyone may pass through the runs directory and a run's own, which stay root's: the user gets its
          // socket and its briefing (0600 each), nothing it could rename or swap under root's feet.
          await mkdirExact(this.runsDir, 0o755);
          await fs.mkdir(dir, { mode: 0o755 });
          await fs.chmod(dir, 0o755);
          this.sockets.set(id, await this.runSockets.open(socket, caller));
        })(),
      ]);
      // Both settled before either failure counts: the undo below then finds everything that was made.
      if (lease.status === 'rejected') throw lease.reason;
      if (files.status === 'rejected') throw files.reason;
      // Made once the lease is applied, as the run's user reads through the mount (its inbox included; nothing it may
      // not read), and what it holds counts as read by the run (its PR lists it).
      const text = (await this.memory.briefing(role, branch, 2000, { owner: false, run: caller })).text;
      await this.runsTree.createFile(`${id}/briefing.md`, text, { mode: 0o600, uid: account.uid, gid: account.gid });
      const issued = lease.value;
      const record: RunRecord = {
        id, home: role, branch, ...(r.task ? { task: r.task } : {}), ...(r.intent ? { intent: r.intent } : {}),
        user: account.name, uid: account.uid, command: r.command!, cwd: r.cwd, lease: issued.lease.id,
        // What the launcher confines the run to follows the lease it was issued: the scope, not the request.
        egress: issued.lease.scopes.includes(EGRESS), started: new Date().toISOString(), state: 'running',
      };
      await this.store(role).write(record, `run ${id}: ${account.name} on ${branch}`);
      this.log.info({ role, run: id, branch, lease: issued.lease.id, user: account.name, egress: record.egress, ...(r.task ? { task: r.task } : {}) }, 'run started');
      const pid = r.launcher ?? 0;
      if (pid > 0) this.launchers.set(id, { role, pid, start: startTimeOf(pid) ?? '' });
      const root = this.homes.mountRoot;
      return {
        id, branch, view: created.view, viewPath: `${root}/${created.view}`, homePath: `${root}/${role}`,
        lease: issued.lease.id, token: issued.token, socket, briefing, store: this.stateDir, uid: account.uid, gid: account.gid,
        egress: record.egress === true,
      };
    } catch (err) {
      await this.undo(role, id);
      throw err;
    }
  }

  /** Take back a run that never ran: its lease and branch, its record if one was written, then its socket and files. */
  private async undo(role: string, id: string): Promise<void> {
    try {
      await this.dropBranch(role, runBranch(id));
      const run = await this.store(role).get(id);
      if (run) await this.ended(role, { ...run, state: 'failed-to-start', ended: new Date().toISOString(), note: 'taken back: its start (or another attempt of its task) failed' });
    } finally {
      await this.cleanUp(id);
    }
  }

  /** What a live run holds in nasd: its place in the tracker, its launcher's watch, its socket and files. */
  private async release(id: string): Promise<void> {
    this.homes.runs.remove(id);
    this.launchers.delete(id);
    await this.sockets.get(id)?.close();
    this.sockets.delete(id);
    await this.runsTree.removeTree(id);
  }

  /**
   * Release a run that has ended (its lease revoked, its record written). A failure leaves the run ended: it is
   * logged, and the periodic pass tries again.
   */
  private async cleanUp(id: string): Promise<void> {
    try {
      await this.release(id);
      if (this.unreleased.delete(id)) this.log.info({ run: id }, 'cleaned up after a run at last');
    } catch (err) {
      if (!this.unreleased.has(id)) this.log.error({ err, run: id }, 'cannot clean up after a run (its lease is revoked and its end recorded); trying again every 5 s');
      this.unreleased.add(id);
    }
  }

  /** A branch that never held a run's work: its leases revoked, the branch removed (nothing to recycle). */
  private async dropBranch(role: string, branch: string): Promise<void> {
    await this.leases.revokeBranch(role, branch);
    if (this.homes.branchNames(role).includes(branch)) await this.branches.discardBranch(role, branch);
    await this.leases.apply(role);
  }

  /** The launcher names the run's PID namespace: from now on that namespace's reads and reaches are the run's. */
  async attach(role: string, id: string, body: { ns: string; launcher?: number }): Promise<RunView> {
    const run = await this.need(role, id);
    if (run.state !== 'running') throw new UserError(`run ${id} is ${run.state}; it cannot be attached`, 409);
    if (!/^pid:\[\d+\]$/.test(body.ns)) throw new UserError('ns must read like /proc/<pid>/ns/pid: pid:[<inode>]');
    this.homes.runs.add({ id, role, branch: run.branch, ns: body.ns });
    return run;
  }

  /**
   * The command ended: commit what is pending, propose (when asked and the run is in good standing), revoke the
   * lease, record how it ended, and only then clean up (cleanUp): a clean-up that fails leaves no run running
   * and no token valid. A second call answers the record as it stands.
   */
  async finish(role: string, id: string, end: RunEnd, creds: Credentials): Promise<RunView> {
    const run = await this.need(role, id);
    if (run.state !== 'running' && run.state !== 'interrupted') return run;
    // The launcher is no longer watched: a death now does not finish the run a second time (reapNow).
    this.launchers.delete(id);
    run.ended = new Date().toISOString();
    if (end.started === false) {
      await this.dropBranch(role, run.branch);
      const failed = await this.ended(role, { ...run, state: 'failed-to-start', note: 'the command could not be executed; its branch was removed' });
      await this.cleanUp(id);
      return failed;
    }
    if (end.exit !== undefined) run.exit = end.exit;
    if (end.signal) run.signal = end.signal;
    let pr: PullRequest | undefined;
    try {
      await this.branches.sync(role, run.branch);
      if (run.state === 'interrupted') {
        run.note ??= 'nasd restarted while the run was in flight: its mount was lost; the work committed before is on its branch, not proposed';
      } else {
        run.state = end.signal ? 'killed' : 'exited';
        if (end.propose) {
          try {
            pr = await this.prs.propose(role, run.branch, { intent: run.intent ?? `run ${id}`, exit: exitOf(end) }, creds);
          } catch (err) {
            if (!(err instanceof UserError)) throw err;
            run.note = `not proposed: ${err.message}`;
          }
        }
      }
    } catch (err) {
      // Whatever failed, the run is over: its lease must not outlive it, and its record must say how it ended.
      if (run.state === 'running') run.state = end.signal ? 'killed' : 'exited';
      run.note = `its end could not be completed: ${(err as Error).message}; what it committed is on ${run.branch}`;
      this.log.error({ err, role, run: id }, 'finishing a run failed');
    } finally {
      await this.leases.revokeBranch(role, run.branch);
      await this.leases.apply(role);
    }
    const removed = await this.removeFinished(role, run.branch);
    if (removed) run.branch_removed = removed;
    const view = await this.ended(role, { ...run, ...(pr ? { pr: pr.id, pr_state: pr.state } : {}) });
    await this.cleanUp(id);
    return pr?.reasons.length ? { ...view, pr_reasons: pr.reasons } : view;
  }

  /**
   * Finished work leaves at the run's end (its lease ended): its branch goes when its PR merged or when it changed
   * nothing (finished-work.ts); what is said of it, or undefined when it stays. A failure keeps the branch.
   */
  private async removeFinished(role: string, branch: string): Promise<string | undefined> {
    try {
      return (await this.branches.removeRunBranch(role, branch)) ?? undefined;
    } catch (err) {
      this.log.error({ err, role, branch }, 'cannot remove the branch of a finished run; it stays until its TTL');
      return undefined;
    }
  }

  private async record(role: string, run: RunRecord): Promise<RunRecord> {
    await this.store(role).write(run, `run ${run.id}: ${run.state}${run.exit !== undefined ? ` (exit ${run.exit})` : ''}`);
    return run;
  }

  /** A run's end, recorded and logged (one line, info, with its ids). */
  private async ended(role: string, run: RunRecord): Promise<RunRecord> {
    await this.record(role, run);
    this.log.info({ role, run: run.id, branch: run.branch, lease: run.lease, state: run.state, exit: run.exit ?? null, signal: run.signal ?? null, pr: run.pr ?? null }, 'run ended');
    return run;
  }

  /**
   * The runs the caller may see (shown-to.ts: the owner every one, a run or a lease holder those of its branch),
   * each with its PR's state now (the record keeps the state it had when the run ended).
   */
  async list(role: string, creds: Credentials): Promise<RunView[]> {
    const shown = await shownTo(role, creds, this.leases);
    if (shown === 'none') return [];
    const runs = (await this.store(role).list()).filter((r) => shown === 'all' || r.branch === shown.branch);
    if (!runs.some((r) => r.pr !== undefined)) return runs;
    const states = new Map((await this.prs.list(role)).map((p) => [p.id, p.state]));
    return runs.map((r) => (r.pr !== undefined && states.has(r.pr) ? { ...r, pr_state: states.get(r.pr) } : r));
  }

  /**
   * Choose one attempt of a task: it is proposed (by the owner, who is deciding by picking, so a PR that waits
   * is approved); once it merged, the other attempts' work goes to the recycle area and their branches away.
   */
  async pick(role: string, task: string, id: string, creds: Credentials): Promise<PickResult> {
    const attempts = (await this.store(role).list()).filter((r) => r.task === task);
    if (attempts.length === 0) throw new UserError(`Home ${role} has no task "${task}"; see nas run list ${role}`, 404);
    const chosen = attempts.find((r) => r.id === id);
    if (!chosen) throw new UserError(`run ${id} is not an attempt of task ${task} (its attempts: ${attempts.map((r) => r.id).join(', ')})`, 404);
    if (chosen.state === 'running') throw new UserError(`run ${id} is still running; pick it once it has ended`, 409);
    if (chosen.state === 'failed-to-start') throw new UserError(`run ${id} never started; pick another attempt`, 409);
    if (chosen.branch_removed) throw new UserError(`run ${id} has nothing to pick: ${chosen.branch_removed}; pick another attempt`, 409);
    const intent = `${chosen.intent ?? `task ${task}`} (attempt ${id} of ${attempts.length}, picked)`;
    let pr = await this.prs.propose(role, chosen.branch, { intent, exit: exitOf(chosen) }, creds);
    if (pr.state === 'waiting') pr = await this.prs.approve(role, pr.id);
    if (pr.state !== 'merged') throw new UserError(`attempt ${id} did not merge (PR ${pr.id} is ${pr.state}: ${pr.reasons.join('; ') || 'see nas pr show'}); no attempt was discarded`, 409);
    const discarded: string[] = [];
    for (const other of attempts.filter((r) => r !== chosen && r.state !== 'failed-to-start' && !r.picked)) {
      if (other.state === 'running') continue;
      await this.branches.discardBranch(role, other.branch).catch((err) => {
        if (!(err instanceof UserError)) throw err;
      });
      await this.leases.revokeBranch(role, other.branch);
      await this.record(role, { ...other, picked: 'discarded' });
      discarded.push(other.id);
    }
    const removed = await this.removeFinished(role, chosen.branch);
    await this.record(role, { ...chosen, picked: 'chosen', pr: pr.id, pr_state: pr.state, ...(removed ? { branch_removed: removed } : {}) });
    return { task, chosen: id, pr, discarded };
  }

  /**
   * At start: runs the last nasd left running lost their mount with it. They are marked interrupted and their
   * leases revoked; their committed work stays on their branches. Stale sockets go.
   */
  async recover(): Promise<void> {
    await mkdirExact(this.runsDir, 0o755);
    // Root's alone to change (runs' directories are made and removed in it as root): repaired when found otherwise.
    const st = await fs.lstat(this.runsDir);
    if (!st.isDirectory()) throw new Error(`${this.runsDir} is not a directory; remove it, then start nasd again`);
    if (st.uid !== 0 || st.gid !== 0 || (st.mode & 0o022) !== 0) {
      await fs.lchown(this.runsDir, 0, 0);
      await fs.chmod(this.runsDir, 0o755);
      this.log.warn({ dir: this.runsDir }, 'the runs directory was writable by others: made root:root 0755');
    }
    // What the last nasd left: each run's directory goes, one that cannot is retried on the periodic pass.
    for (const id of await fs.readdir(this.runsDir)) await this.cleanUp(id);
    for (const role of this.homes.roles()) {
      for (const run of (await this.store(role).list()).filter((r) => r.state === 'running')) {
        run.state = 'interrupted';
        run.note = 'nasd restarted while the run was in flight: its mount was lost; the work committed before is on its branch, not proposed';
        await this.leases.revokeBranch(role, run.branch);
        await this.record(role, run);
        this.log.warn({ role, run: run.id }, 'run interrupted by the restart');
      }
    }
  }

  /** At shutdown: runs' sockets go, so their launchers learn at once that the run's files are no longer served. */
  async close(): Promise<void> {
    for (const socket of this.sockets.values()) await socket.close();
    this.sockets.clear();
  }

  private reaping = false;

  /**
   * The periodic pass: a run whose nas run died (kill -9) is stopped, committed and recorded as killed; the
   * clean-up of an ended run that failed is tried again.
   */
  async reapOrphans(): Promise<void> {
    if (this.reaping) return;
    this.reaping = true;
    try {
      await this.reapNow();
    } finally {
      this.reaping = false;
    }
  }

  private async reapNow(): Promise<void> {
    for (const id of [...this.unreleased]) await this.cleanUp(id);
    for (const [id, launcher] of this.launchers) {
      if (startTimeOf(launcher.pid) === launcher.start) continue;
      const active = this.homes.runs.all().find((r) => r.id === id);
      for (const pid of active ? this.homes.runs.members(active) : []) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
      this.log.warn({ role: launcher.role, run: id }, 'the nas run of this run died: its processes were stopped and its work committed');
      await this.finish(launcher.role, id, { signal: 'SIGKILL', exit: 137, propose: false }, { owner: true }).catch((err) =>
        this.log.error({ err, run: id }, 'cannot finish an orphaned run'));
    }
  }
}
