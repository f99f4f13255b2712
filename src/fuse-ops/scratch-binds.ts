import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Logger } from 'pino';

const run = promisify(execFile);

/**
 * mount and umount, or, for a nasd sandboxed in a mount namespace of its own (NAS_MOUNT_BROKER set, see
 * libexec/nas-mount-broker), the relay that asks the broker to make them where everyone sees them.
 */
const RELAY = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../libexec/nas-mount-relay');
const mountCmd = (verb: 'bind' | 'umount', args: string[]): Promise<unknown> => {
  // A bind is nodev and nosuid as the FUSE mount is (mount(8) remounts it so at once; the broker makes it so before
  // attaching it): a device node or setuid file in an upper directory does not act as one.
  const [cmd, argv] = process.env.NAS_MOUNT_BROKER ? [RELAY, [verb, ...args]] : verb === 'bind' ? ['mount', ['--bind', '-o', 'nodev,nosuid', ...args]] : ['umount', args];
  // A mount that hangs (a stuck broker) must not hold up the branch that waits for it: it fails, and logs.
  return run(cmd, argv, { timeout: 150_000 });
};

/**
 * Scratch at disk speed: a branch view's scratch roots (workspace/) are its upper directories themselves,
 * bind-mounted over the view, so scratch I/O never pays a round trip through the daemon. The mounts are
 * made by child processes: the mount call looks the target up through this daemon's own FUSE mount, which
 * the daemon's one JavaScript thread must stay free to answer.
 */
export class ScratchBinds {
  /** Target -> source of every bind made. */
  private readonly binds = new Map<string, string>();
  private live = false;

  constructor(private readonly log: Logger) {}

  /** The FUSE mount is up: make every bind asked for so far, and from now on each as it is asked for. */
  async start(pending: { source: string; target: string }[], opts: { adopt?: boolean } = {}): Promise<void> {
    this.live = true;
    // After a hand-over the binds the nasd before made are still mounted: they are taken as made.
    const mounted = opts.adopt ? await mountPoints() : new Set<string>();
    for (const b of pending) {
      if (mounted.has(b.target)) this.binds.set(b.target, b.source);
      else await this.bind(b.source, b.target);
    }
  }

  async bind(source: string, target: string): Promise<void> {
    if (!this.live || this.binds.has(target)) return;
    try {
      await mountCmd('bind', [source, target]);
      this.binds.set(target, source);
    } catch (err) {
      // The view still works: scratch is then served through FUSE, slower but the same files.
      this.log.error({ err, source, target }, 'cannot bind-mount scratch over the view; it is served through FUSE instead');
    }
  }

  /** Undo the binds at or below a view's path (a discarded branch), before the view goes. */
  async unbindUnder(viewPath: string): Promise<void> {
    for (const target of [...this.binds.keys()]) {
      if (target === viewPath || target.startsWith(`${viewPath}/`)) await this.unbind(target);
    }
  }

  /**
   * Undo every bind (shutdown): the FUSE mount cannot be unmounted while mounts sit on it. When the mount was
   * removed from outside (umount -R, umount -l), the binds went with it: there is nothing left to undo.
   */
  async stop(mountGone = false): Promise<void> {
    this.live = false;
    if (mountGone) this.binds.clear();
    for (const target of [...this.binds.keys()]) await this.unbind(target);
  }

  private async unbind(target: string): Promise<void> {
    try {
      await mountCmd('umount', [target]);
    } catch {
      // Busy (a process works in it): detach it now; it goes when the last user leaves.
      await mountCmd('umount', ['-l', target]).catch((err) => this.log.error({ err, target }, 'cannot unmount a scratch bind'));
    }
    this.binds.delete(target);
  }
}

/** Every mount point this process sees (/proc/self/mountinfo's fifth field, octal escapes undone). */
async function mountPoints(): Promise<Set<string>> {
  const text = await fs.readFile('/proc/self/mountinfo', 'utf8');
  const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  return new Set(text.split('\n').filter(Boolean).map((line) => unescape(line.split(' ')[4])));
}
