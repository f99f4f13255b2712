import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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

/** The helper is gone (or never came): the caller runs the program itself. */
export class SpawnerGone extends Error {}

type Pending = { resolve: (r: Ran) => void; reject: (e: Error) => void };

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'spawner-child.js');

class Spawner {
  private child: ChildProcess | null = null;
  private readonly pending = new Map<number, Pending>();
  private seq = 0;
  /** After a failure to start, nasd starts its programs itself until this time. */
  private retryAfter = 0;

  /** Run `cmd args` in the helper: its exit and output, killed (its process group) after timeoutMs when > 0. */
  run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Ran> {
    const child = this.helper();
    if (!child) return Promise.reject(new SpawnerGone('no spawner'));
    const id = ++this.seq;
    return new Promise<Ran>((resolve, reject) => {
      // A call under way keeps the process alive (as a child of its own would); none holds it up otherwise.
      if (this.pending.size === 0) channelOf(child)?.ref();
      this.pending.set(id, { resolve, reject });
      child.send({ id, cmd, args, env, timeoutMs }, (err) => {
        if (!err) return;
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
      child.on('message', (m: { id: number; error?: string } & Ran) => {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if (this.pending.size === 0) channelOf(child)?.unref();
        if (m.error !== undefined) p.reject(new Error(m.error));
        else p.resolve({ code: m.code, signal: m.signal, stdout: m.stdout, stderr: m.stderr });
      });
      const gone = (why: string) => {
        if (this.child !== child) return;
        this.child = null;
        this.retryAfter = Date.now() + 5000;
        for (const p of this.pending.values()) p.reject(new SpawnerGone(why));
        this.pending.clear();
      };
      child.on('exit', (code, signal) => gone(`the spawner exited (${signal ?? code})`));
      child.on('error', (err) => gone(err.message));
      // nasd's exit is not held up by its helper; the helper ends when nasd's end closes the channel.
      child.unref();
      channelOf(child)?.unref();
      this.child = child;
      return child;
    } catch {
      this.retryAfter = Date.now() + 5000;
      return null;
    }
  }
}

const channelOf = (c: ChildProcess) => c.channel as unknown as { ref(): void; unref(): void } | undefined;

export const spawner = new Spawner();
