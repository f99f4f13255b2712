import fs from 'node:fs/promises';
import { closeSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Connection, LegacyNodes } from '../fuse-ops/native.js';
import { dropDescriptor, notifySocket, storeDescriptor } from './sd-notify.js';
import { HUP_GUARD } from '../util/addon.js';
import { sys } from '../util/sys.js';
import type { OpenHandle } from '../fuse-ops/ops.js';

/**
 * A restart that clients do not see. The kernel connection (/dev/fuse) is kept in systemd's file descriptor
 * store (the unit's FileDescriptorStoreMax=; the tests use a small stand-in that speaks the same protocol), so it
 * outlives nasd; a stopping nasd answers every request it took, then leaves its successor what that needs
 * (the kernel's INIT, the node table, the open files) in the state directory; the successor takes the
 * connection over, and requests made meanwhile wait in the kernel instead of failing.
 */

/** The name the connection is stored under (FDNAME=, LISTEN_FDNAMES). */
const NAME = 'fuse';
const FILE = 'handover.json';

export interface Inherited {
  fd: number;
  init: Buffer;
  nodes: Buffer | LegacyNodes;
  handles: OpenHandle[];
  /** Whether the kernel checks POSIX ACLs on this connection (what its first nasd negotiated at INIT). */
  acls: boolean;
}

interface Left {
  /** The mount point it serves: a successor configured for another one mounts afresh (the unit unmounts this). */
  mount: string;
  /**
   * The kernel's INIT as read and the binding's node table, base64. Under a key of its own: a nasd from before it
   * (a downgrade by reload) finds no `init`, drops the connection and mounts afresh rather than serve a table it
   * cannot read.
   */
  kernel?: { init: string; table: string };
  /** What a nasd before 2026-12 left: the INIT and the table as a flat array (still read: an upgrade by reload). */
  init?: string;
  nodes?: LegacyNodes;
  handles: OpenHandle[];
  /** Whether the connection was set up with POSIX ACLs (absent: by a nasd before them, which had none). */
  acls?: boolean;
}

/** The INIT and node table a Left holds, in either format; null when it holds neither. */
function connectionOf(left: Left): { init: Buffer; nodes: Buffer | LegacyNodes } | null {
  if (left.kernel) return { init: Buffer.from(left.kernel.init, 'base64'), nodes: Buffer.from(left.kernel.table, 'base64') };
  if (left.init && left.nodes) return { init: Buffer.from(left.init, 'base64'), nodes: left.nodes };
  return null;
}

/**
 * The connection systemd passed this process (LISTEN_FDS, named `fuse`) with what the nasd before left for it, or
 * null. A connection its nasd did not hand on (it crashed) is dropped: requests that nasd had taken would never
 * be answered, and dropping it ends them; the mount is then made afresh.
 */
export async function inheritedConnection(stateDir: string, mount: string, log: Logger): Promise<Inherited | null> {
  const file = path.join(stateDir, FILE);
  const left = await fs.readFile(file, 'utf8').then((t) => JSON.parse(t) as Left, () => null);
  await fs.rm(file, { force: true });
  const count = Number(process.env.LISTEN_FDS ?? 0);
  const ours = Number(process.env.LISTEN_PID) === process.pid;
  const index = (process.env.LISTEN_FDNAMES ?? '').split(':').indexOf(NAME);
  // Not passed on to anything nasd starts.
  delete process.env.LISTEN_FDS;
  delete process.env.LISTEN_PID;
  delete process.env.LISTEN_FDNAMES;
  if (!ours || count < 1 || index < 0) return null;
  const fd = 3 + index;
  const conn = left && connectionOf(left);
  if (!left || !conn || left.mount !== mount) {
    if (conn) log.warn({ was: left?.mount, mount }, 'the mount point changed: dropping the kernel connection kept for the old one, mounting afresh');
    else log.warn('systemd kept a kernel connection, but the nasd before did not hand it on (it crashed?): dropping it and mounting afresh');
    dropDescriptor(NAME);
    closeSync(fd);
    // The kernel ends the connection once its last descriptor is closed: then the mount reads as stale.
    await new Promise((resolve) => setTimeout(resolve, 500));
    return null;
  }
  return { fd, ...conn, handles: left.handles, acls: left.acls === true };
}

/**
 * Put the connection in systemd's store when asked to (NAS_KEEP_CONNECTION=1 beside FileDescriptorStoreMax= in
 * the unit; systemd drops a descriptor it has no room for without a word, so nasd cannot tell by itself);
 * whether it is kept there.
 */
export function storeConnection(fd: number): boolean {
  keepAsked = process.env.NAS_KEEP_CONNECTION === '1';
  delete process.env.NAS_KEEP_CONNECTION;
  return keepAsked && storeDescriptor(NAME, fd);
}
let keepAsked = false;

/**
 * A reload (SIGHUP, systemctl reload): this process becomes the next nasd, which takes the connection over as
 * after a restart (leaveForSuccessor first). Nothing waits on systemd: no new namespace, no gap in which systemd
 * touches the mount. Returns only if the exec failed (-errno).
 */
export function becomeSuccessor(fd: number): number {
  const env: NodeJS.ProcessEnv = { ...process.env, LISTEN_FDS: '1', LISTEN_FDNAMES: NAME, LISTEN_PID: String(process.pid) };
  // Another SIGHUP (kill -HUP, a logrotate postrotate) may come before the next nasd listens for it: the guard
  // keeps it from ending the process meanwhile (main.ts drops the preload again).
  env.LD_PRELOAD = [HUP_GUARD, process.env.LD_PRELOAD].filter(Boolean).join(' ');
  const socket = notifySocket();
  if (socket) env.NOTIFY_SOCKET = socket;
  if (keepAsked) env.NAS_KEEP_CONNECTION = '1';
  const vars = Object.entries(env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
  return sys().exec(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], vars, fd);
}

/** What the successor needs, written once every request taken was answered (root's state directory, 0600). */
export async function leaveForSuccessor(stateDir: string, mount: string, conn: Connection, handles: OpenHandle[], acls: boolean): Promise<void> {
  const left: Left = { mount, kernel: { init: conn.init.toString('base64'), table: conn.nodes.toString('base64') }, handles, acls };
  const file = path.join(stateDir, FILE);
  await fs.writeFile(`${file}.tmp`, JSON.stringify(left), { mode: 0o600 });
  await fs.rename(`${file}.tmp`, file);
}
