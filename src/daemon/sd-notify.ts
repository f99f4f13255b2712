import { sys } from '../util/sys.js';

/**
 * systemd's notify protocol (sd_notify(3)) for nasd.service: readiness (Type=notify), stopping, and the file
 * descriptor store that keeps the kernel connection across a restart (handover.ts). nasd sends each message from
 * its own process (the binding's sendmsg, which Node lacks), so the unit's NotifyAccess=main suffices. Outside
 * systemd (no NOTIFY_SOCKET: by hand, the mount helper) nothing is sent.
 *
 * The socket is taken out of the environment at load, as sd_notify's unset_environment does: git, and any other
 * program nasd starts, must not speak for nasd.
 */
const socket = process.env.NOTIFY_SOCKET;
delete process.env.NOTIFY_SOCKET;

/** Send one message (a descriptor with it when fd >= 0); whether systemd's socket took it. Never throws. */
function send(state: string, fd = -1): boolean {
  if (!socket) return false;
  const rc = sys().notify(socket, state, fd);
  if (rc !== 0) process.stderr.write(`nasd: sd_notify ${state.split('\n')[0]} failed (errno ${-rc})\n`);
  return rc === 0;
}

/** Tell systemd nasd serves (the mount and the control socket are up). */
export async function notifyReady(status = 'serving'): Promise<void> {
  send(`READY=1\nSTATUS=${status}`);
}

/** Tell systemd nasd reloads (systemctl reload): it is READY again once the next nasd, in this process, serves. */
export function notifyReloading(): void {
  send(`RELOADING=1\nMONOTONIC_USEC=${process.hrtime.bigint() / 1000n}\nSTATUS=reloading: handing the kernel connection on`);
}

/** The notify socket as the environment gave it, for the next nasd this process becomes (exec keeps the pid). */
export function notifySocket(): string | undefined {
  return socket;
}

/** Tell systemd nasd is stopping on its own (e.g. its mount was removed from outside). */
export async function notifyStopping(status = 'stopping: committing pending changes, then unmounting'): Promise<void> {
  send(`STOPPING=1\nSTATUS=${status}`);
}

/** Keep a descriptor in systemd's store under a name (FileDescriptorStoreMax= in the unit); whether it is kept. */
export function storeDescriptor(name: string, fd: number): boolean {
  return send(`FDSTORE=1\nFDNAME=${name}`, fd);
}

/** Take a descriptor out of systemd's store (systemd closes its copy). */
export function dropDescriptor(name: string): void {
  send(`FDSTOREREMOVE=1\nFDNAME=${name}`);
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
