import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { Beneath, chmodNoFollow } from '../util/beneath.js';

/**
 * Where and how a custom check runs. Its files are in a directory of its own, `<dir>/<random>/`, the check user's
 * and 0700 (its tree, its executable and $NAS_CHANGES inside, all the check user's, 0700 or 0600): only that user
 * and root reach them. `<dir>` is `checks/` in nasd's runtime directory (beside `runs/`, by the control socket),
 * root's and 0711: the check user passes through it to its own directory, no one else can list or change it. Not
 * in the state directory: that is 0700 (systemd's StateDirectoryMode too), and a working directory whose path its
 * user cannot walk breaks realpath() (git, Node). Everything is made and removed as root through `Beneath`, which
 * follows no link; the check runs under check-runner.ts, which kills all it started when it ends.
 */

/** Custom checks run as nobody: main's .nas/ is the owner's, but its scripts need no privilege. */
export const CHECK_USER = { uid: 65534, gid: 65534 };

const RUNNER = fileURLToPath(new URL('./check-runner.js', import.meta.url));

export class CheckDirs {
  private readonly beneath: Beneath;

  constructor(readonly dir: string, private readonly user = CHECK_USER) {
    this.beneath = new Beneath(dir);
  }

  /**
   * At nasd's start: the directory made (root's, 0711; repaired with a log line when found otherwise), and what
   * checks left in it when a nasd stopped during them removed.
   */
  async prepare(log: Logger): Promise<void> {
    // Whoever may rename in the folder above could swap checks/ itself between nasd's look and its use.
    const above = await fs.stat(path.dirname(this.dir));
    if (above.uid !== 0 || ((above.mode & 0o022) !== 0 && (above.mode & 0o1000) === 0)) {
      throw new Error(`${path.dirname(this.dir)} (where nasd's socket is) is not root's alone: custom checks cannot get a safe ` +
        `directory there; make it root's alone (chmod go-w), or use a socket path in such a directory (--socket)`);
    }
    const made = await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const st = await fs.lstat(this.dir);
    if (!st.isDirectory()) throw new Error(`${this.dir} is not a directory; remove it, then start nasd again`);
    if (st.uid !== 0 || st.gid !== 0 || (st.mode & 0o7777) !== 0o711) {
      await fs.lchown(this.dir, 0, 0);
      await chmodNoFollow(this.dir, 0o711);
      if (!made) log.warn({ dir: this.dir, uid: st.uid, was: (st.mode & 0o7777).toString(8) }, 'the checks directory was not root\'s and 0711: repaired');
    }
    await this.beneath.removeTree('');
  }

  /**
   * Why the check user cannot walk to the directory (a folder on the way it may not pass through), or null. Asked
   * before each check: the runtime directory's modes are the operator's.
   */
  async unreachable(): Promise<string | null> {
    for (let dir = this.dir; ; dir = path.dirname(dir)) {
      const st = await fs.stat(dir);
      const passes = st.uid === this.user.uid ? st.mode & 0o100 : st.gid === this.user.gid ? st.mode & 0o010 : st.mode & 0o001;
      if (!passes) {
        return `custom checks run as nobody, who cannot pass through ${dir} (mode ${(st.mode & 0o777).toString(8)}) to ${this.dir}: ` +
          `make it passable (chmod o+x ${dir}), or put nasd's socket in a directory that is`;
      }
      if (dir === '/') return null;
    }
  }

  /** A new directory for one check, with its tree (empty) in it. */
  async create(): Promise<CheckDir> {
    const name = randomBytes(16).toString('hex');
    const own = { uid: this.user.uid, gid: this.user.gid };
    await this.beneath.mkdir(name, { mode: 0o700, ...own });
    const dir = new CheckDir(this.beneath, this.dir, name, this.user);
    try {
      await this.beneath.mkdir(`${name}/tree`, { mode: 0o700, ...own });
    } catch (err) {
      await dir.remove();
      throw err;
    }
    return dir;
  }
}

/** One check's directory: `.check` (the executable), `changes` ($NAS_CHANGES) and `tree/` (its working directory). */
export class CheckDir {
  /** Folders of the tree made so far. */
  private readonly made = new Set<string>(['']);

  constructor(private readonly beneath: Beneath, root: string, private readonly name: string, private readonly user: typeof CHECK_USER) {
    this.path = `${root}/${name}`;
  }

  readonly path: string;

  private create(rel: string, content: Buffer | string, mode: number): Promise<void> {
    return this.beneath.createFile(`${this.name}/${rel}`, content, { mode, uid: this.user.uid, gid: this.user.gid });
  }

  async writeExecutable(content: Buffer): Promise<void> {
    await this.create('.check', content, 0o700);
  }

  async writeChanges(text: string): Promise<void> {
    await this.create('changes', text, 0o600);
  }

  /** A proposed file at its path in the Home (a checked relative path), in the folders it needs. */
  async writeFile(rel: string, content: Buffer, executable: boolean): Promise<void> {
    const parts = rel.split('/');
    for (let i = 1; i < parts.length; i++) {
      const folder = parts.slice(0, i).join('/');
      if (this.made.has(folder)) continue;
      await this.beneath.mkdir(`${this.name}/tree/${folder}`, { mode: 0o700, uid: this.user.uid, gid: this.user.gid });
      this.made.add(folder);
    }
    await this.create(`tree/${rel}`, content, executable ? 0o700 : 0o600);
  }

  /**
   * Run the executable as the check user in the tree, with $NAS_CHANGES; its output (capped at `max`) whatever
   * it wrote to stdout and stderr. At `timeoutMs` it and everything it started are killed (`killed`).
   */
  run(timeoutMs: number, max: number): Promise<{ code: number | null; output: string; killed: boolean; error?: string }> {
    const tree = `${this.path}/tree`;
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [RUNNER, String(this.user.uid), String(this.user.gid), tree, `${this.path}/.check`], {
        env: { PATH: process.env.PATH, HOME: tree, NAS_CHANGES: `${this.path}/changes` },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let output = '';
      let killed = false;
      let done = false;
      const finish = (code: number | null, error?: string) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        child.stdin.destroy();
        child.stdout.destroy();
        child.stderr.destroy();
        resolve({ code, output: output.slice(0, max), killed, ...(error ? { error } : {}) });
      };
      const take = (d: Buffer) => (output = (output + d.toString()).slice(0, max));
      child.stdout.on('data', take);
      child.stderr.on('data', take);
      child.stdin.on('error', () => undefined);
      // Closing the runner's input stops the check: it kills all the check started, then exits.
      const timer = setTimeout(() => {
        killed = true;
        child.stdin.end();
      }, timeoutMs);
      child.on('error', (err) => finish(null, err.message));
      // By its exit every process of the check is gone; what they wrote last is still in the pipes.
      child.on('exit', (code) => setTimeout(() => finish(code), 50));
    });
  }

  /** Remove it all, following no link and not leaving the filesystem (whatever the check made of its tree). */
  async remove(): Promise<void> {
    await this.beneath.removeTree(this.name);
  }
}
