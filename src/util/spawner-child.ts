import { spawn } from 'node:child_process';
import { killGroup } from './kill-group.js';

/**
 * The helper of spawner.ts: runs each program asked for over the IPC channel and answers with its exit and
 * output. Each program gets a process group of its own, killed whole at its deadline (git's transport helpers
 * would otherwise hold the call open); its pid goes to nasd first, which kills the group if this helper dies or
 * hangs. When nasd goes, so does this, and what it started.
 */

interface Ask {
  id: number;
  cmd: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
}

const running = new Set<number>();

function start(a: Ask): void {
  const answer = (m: object) => process.send?.({ id: a.id, ...m });
  // Each in a process group of its own, whether it has a deadline or not: killed whole at its deadline here, or
  // by nasd (by the pid reported now) if this helper dies or hangs with it under way.
  const child = spawn(a.cmd, a.args, { stdio: ['ignore', 'pipe', 'pipe'], env: a.env, detached: true });
  let stdout = '';
  let stderr = '';
  const pid = child.pid;
  if (pid !== undefined) {
    running.add(pid);
    answer({ pid });
  }
  const timer = a.timeoutMs > 0 && pid !== undefined ? setTimeout(() => killGroup(pid), a.timeoutMs) : undefined;
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.on('error', (err) => {
    clearTimeout(timer);
    answer({ error: err.message });
  });
  child.on('close', (code, signal) => {
    clearTimeout(timer);
    if (pid !== undefined) running.delete(pid);
    answer({ code, signal, stdout, stderr });
  });
}

process.on('message', (a: Ask) => start(a));
process.on('disconnect', () => {
  for (const pid of running) killGroup(pid);
  process.exit(0);
});
