import { spawn } from 'node:child_process';

/**
 * The helper of spawner.ts: runs each program asked for over the IPC channel and answers with its exit and
 * output. With a deadline the program gets a process group of its own, killed whole (git's transport helpers
 * would otherwise hold the call open). When nasd goes, so does this, and what it started.
 */

interface Ask {
  id: number;
  cmd: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
}

const running = new Set<number>();

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

function start(a: Ask): void {
  const answer = (m: object) => process.send?.({ id: a.id, ...m });
  const child = spawn(a.cmd, a.args, { stdio: ['ignore', 'pipe', 'pipe'], env: a.env, detached: a.timeoutMs > 0 });
  let stdout = '';
  let stderr = '';
  const pid = child.pid;
  if (pid !== undefined && a.timeoutMs > 0) running.add(pid);
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
