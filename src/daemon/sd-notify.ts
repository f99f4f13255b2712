import { execFile } from 'node:child_process';

/**
 * systemd's readiness protocol (sd_notify(3)) for nasd.service's Type=notify. Node cannot send on a unix datagram
 * socket, so systemd-notify(1) sends the message; it waits until systemd has read it (its barrier), so the sender
 * is still alive when systemd matches it to nasd's unit (the unit says NotifyAccess=all: the sender is nasd's
 * child). Outside systemd (no NOTIFY_SOCKET: by hand, the mount helper) nothing happens.
 *
 * The socket is taken out of the environment at load, as sd_notify's unset_environment does: git, and any other
 * program nasd starts, must not speak for nasd.
 */
const socket = process.env.NOTIFY_SOCKET;
delete process.env.NOTIFY_SOCKET;

/** Tell systemd nasd serves (the mount and the control socket are up). Never throws; resolves once sent or failed. */
export function notifyReady(status = 'serving'): Promise<void> {
  return notify(['--ready', `--status=${status}`]);
}

/** Tell systemd nasd is stopping on its own (e.g. its mount was removed from outside). Never throws. */
export function notifyStopping(status = 'stopping: committing pending changes, then unmounting'): Promise<void> {
  return notify([`--status=${status}`, 'STOPPING=1']);
}

function notify(args: string[]): Promise<void> {
  if (!socket) return Promise.resolve();
  return new Promise((resolve) => {
    execFile('systemd-notify', args, { env: { ...process.env, NOTIFY_SOCKET: socket }, timeout: 10_000 }, (err, _out, stderr) => {
      if (err) process.stderr.write(`nasd: systemd-notify ${args.join(' ')} failed: ${stderr.trim() || err.message}\n`);
      resolve();
    });
  });
}

/**
 * Under systemd, nasd's stdout is a stream to the journal (JOURNAL_STREAM names it): a line that starts with
 * `<N>` is stored at syslog priority N, so `journalctl -p warning` finds nasd's warnings. This returns the
 * function that prefixes a pino line with its level's priority, or undefined when stdout is anything else
 * (a log file, a terminal), which gets the JSON lines unchanged.
 */
export function journalPrefixer(fstat: () => { dev: number; ino: number }): ((line: string) => string) | undefined {
  const stream = process.env.JOURNAL_STREAM;
  if (!stream) return undefined;
  try {
    const { dev, ino } = fstat();
    if (stream !== `${dev}:${ino}`) return undefined;
  } catch {
    return undefined;
  }
  return (line) => {
    // pino's line starts {"level":N,...
    const level = Number(/^\{"level":(\d+)/.exec(line)?.[1] ?? 30);
    return `<${level >= 60 ? 2 : level >= 50 ? 3 : level >= 40 ? 4 : level >= 30 ? 6 : 7}>${line}`;
  };
}
