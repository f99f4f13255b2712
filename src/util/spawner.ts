import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { killGroup } from './kill-group.js';

/**
 * Programs started by a small helper process rather than by nasd itself. Starting a process from nasd forks
 * nasd whole (its heap, its FUSE threads) and blocks its one JS thread until the child has run exec: 20-80 ms
 * each on a loaded 2-core host, during which no FUSE request, etcd answer or merge moves. A cluster host runs
 * git against the git server several times a second (follow main, push, fetch heads, reconcile): those go
 * through here, forked from a process of a few MB (spawner-child.ts). Without the helper (it could not start,
 * or died), the caller starts the program itself.
 */

export interface Ran {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** The helper is gone (or never came) before the call reached it: the caller runs the program itself. */
export class SpawnerGone extends Error {}

/**
 * The helper died (or hung, and was killed) with the call under way: the program may have run, in part (a push
 * may be on the server). A failure, never re-run blindly: the caller's own retry reads the server again.
 */
export class SpawnerDied extends Error {}

/** A call under way: its program's pid once the helper reports it started (its process group is killed with the helper). */
type Pending = { resolve: (r: Ran) => void; reject: (e: Error) => void; timer: NodeJS.Timeout; pid?: number };

/** Past a call's own deadline, how long the helper has to answer (it kills the program at the deadline) before it is taken for hung. */
const GRACE_MS = 5000;

/** A call without a deadline (a local git log) is bounded here all the same: a hung helper must not wedge nasd. */
const UNTIMED_CALL_MS = 5 * 60_000;

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'spawner-child.js');

class Spawner {
  private child: ChildProcess | null = null;
  private readonly pending = new Map<number, Pending>();
  private seq = 0;
  /** After a failure to start, nasd starts its programs itself until this time. */
  private retryAfter = 0;
  /** The helper has sent something: a call it dies with may have run (before, none could: the caller runs it itself). */
  private spoke = false;

  /** Run `cmd args` in the helper: its exit and output, killed (its process group) after timeoutMs when > 0. */
  run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Ran> {
    const child = this.helper();
    if (!child) return Promise.reject(new SpawnerGone('no spawner'));
    const id = ++this.seq;
    return new Promise<Ran>((resolve, reject) => {
      // A call under way keeps the process alive (as a child of its own would); none holds it up otherwise.
      if (this.pending.size === 0) channelOf(child)?.ref();
      const limit = timeoutMs > 0 ? timeoutMs + GRACE_MS : UNTIMED_CALL_MS;
      const timer = setTimeout(() => this.gone(child, `the spawner did not answer ${cmd} ${args[args.length - 1] ?? ''} within ${limit / 1000} s; killed`), limit);
      this.pending.set(id, { resolve, reject, timer });
      child.send({ id, cmd, args, env, timeoutMs }, (err) => {
        if (!err || !this.pending.has(id)) return;
        clearTimeout(timer);
        this.pending.delete(id);
        reject(new SpawnerGone(err.message));
      });
    });
  }

  private helper(): ChildProcess | null {
    if (this.child) return this.child;
    if (Date.now() < this.retryAfter) return null;
    try {
      const child = fork(CHILD, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'json', execArgv: [] });
      child.on('message', (m: { id: number; pid?: number; error?: string } & Ran) => this.answered(child, m));
      child.on('exit', (code, signal) => this.gone(child, `the spawner exited (${signal ?? code})`));
      child.on('error', (err) => this.gone(child, err.message));
      // nasd's exit is not held up by its helper; the helper ends when nasd's end closes the channel.
      child.unref();
      channelOf(child)?.unref();
      this.child = child;
      this.spoke = false;
      return child;
    } catch {
      this.retryAfter = Date.now() + 5000;
      return null;
    }
  }

  /** A message of the helper: a program started (its pid), or a call's end. */
  private answered(child: ChildProcess, m: { id: number; pid?: number; error?: string } & Ran): void {
    if (child !== this.child) return;
    this.spoke = true;
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.pid !== undefined) {
      p.pid = m.pid;
      return;
    }
    clearTimeout(p.timer);
    this.pending.delete(m.id);
    if (this.pending.size === 0) channelOf(child)?.unref();
    if (m.error !== undefined) p.reject(new Error(m.error));
    else p.resolve({ code: m.code, signal: m.signal, stdout: m.stdout, stderr: m.stderr });
  }

  /** The helper died or hung: it is killed, so is each program it had under way (by its group), and each call fails. */
  private gone(child: ChildProcess, why: string): void {
    if (this.child !== child) return;
    this.child = null;
    this.retryAfter = Date.now() + 5000;
    child.kill('SIGKILL');
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      if (p.pid !== undefined) killGroup(p.pid);
      p.reject(this.spoke ? new SpawnerDied(why) : new SpawnerGone(why));
    }
    this.pending.clear();
  }
}

const channelOf = (c: ChildProcess) => c.channel as unknown as { ref(): void; unref(): void } | undefined;

export const spawner = new Spawner();
