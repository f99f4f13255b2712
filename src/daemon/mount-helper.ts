import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import { UserError } from '../util/errors.js';
import { mkdirExact } from '../util/exact-mode.js';

/**
 * nasd as a mount helper: `mount -t fuse.nasd nasd /agents -o state_dir=/var/lib/agent-nas,demo` (or the same
 * line in /etc/fstab, or a systemd .mount unit) has mount.fuse3 run `nasd nasd /agents -o ...`. nasd then
 * starts itself in the background with the matching flags, waits until it serves, and returns, as mount
 * expects. `umount /agents` stops it (it notices its mount is gone, commits what is pending, and exits).
 */

const KEYS: Record<string, string> = {
  state_dir: '--state-dir', socket: '--socket', socket_group: '--socket-group', commit_window_ms: '--commit-window-ms',
  log_level: '--log-level', config: '--config', web_listen: '--web-listen', templates_dir: '--templates-dir',
  metrics_listen: '--metrics-listen',
};
/** Options mount(8) and systemd pass to every filesystem, which mean nothing more to nasd. */
const GENERIC = new Set(['rw', 'defaults', 'auto', 'noauto', 'user', 'nouser', 'users', 'nofail', '_netdev', 'suid', 'nosuid', 'dev', 'nodev', 'exec', 'noexec', 'atime', 'noatime', 'relatime', 'allow_other']);
const DEFAULT_LOG = '/var/log/agent-nas/nasd.log';
const LOG_MODE = 0o640;

export interface MountCall {
  flags: string[];
  log: string;
}

/** The flags a mount(8)-style call stands for (`<source> <mountpoint> [-o opts]`), or null for nasd's own flags. */
export function mountCall(argv: string[]): MountCall | null {
  const positional: string[] = [];
  const opts: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '-o') opts.push(...(argv[++i] ?? '').split(','));
    else if (argv[i].startsWith('-')) return null;
    else positional.push(argv[i]);
  }
  if (positional.length !== 2) return null;
  const flags = ['--mount', positional[1]];
  let log = DEFAULT_LOG;
  for (const opt of opts.filter(Boolean)) {
    const eq = opt.indexOf('=');
    const key = eq < 0 ? opt : opt.slice(0, eq);
    const value = eq < 0 ? '' : opt.slice(eq + 1);
    if (key === 'demo') flags.push('--demo');
    else if (key === 'log') log = value;
    else if (KEYS[key]) {
      if (!value) throw new UserError(`mount option ${key} needs a value (${key}=...)`);
      flags.push(KEYS[key], value);
    } else if (!GENERIC.has(key) && !key.startsWith('x-')) {
      throw new UserError(`unknown mount option "${key}" (known: ${[...Object.keys(KEYS), 'demo', 'log'].join(', ')})`);
    }
  }
  return { flags, log };
}

/** Start nasd in the background with these flags; resolve once it serves, or throw what it said when it could not. */
export async function startInBackground(entry: string, call: MountCall): Promise<number> {
  await mkdirExact(call.log.slice(0, call.log.lastIndexOf('/')) || '/', 0o750);
  // The log names Homes, branches, principals and paths: root's and its group's (adm reads logs), no one else's.
  const out = await fs.open(call.log, 'a', LOG_MODE);
  await out.chmod(LOG_MODE);
  const from = (await out.stat()).size;
  const child = spawn(process.execPath, [entry, ...call.flags], { detached: true, stdio: ['ignore', out.fd, out.fd] });
  await out.close();
  let exited: number | null = null;
  child.once('exit', (code) => (exited = code ?? 1));
  child.unref();
  for (let i = 0; i < 600; i++) {
    const text = (await fs.readFile(call.log, 'utf8')).slice(from);
    if (text.includes('"nasd ready"')) return child.pid!;
    if (exited !== null) {
      const said = text.trim().split('\n').slice(-5).join('\n');
      throw new UserError(`nasd did not start (exit ${exited}):\n${said}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new UserError(`nasd did not answer within 60 s; see ${call.log}`);
}
