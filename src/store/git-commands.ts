import fs from 'node:fs/promises';
import { spawn } from 'node:child_process';
import type { ObjectCounts } from './types.js';
import { spawner, SpawnerGone, type Ran } from '../util/spawner.js';

/**
 * Git commands: everything the Store does by running git itself as its own process (hashing large files, gc and
 * packing, bundles, mirrors and remotes) and its hook scripts. libgit2 has no gc, bundle or mirror push, and
 * git hashes a large file faster than libgit2 can.
 */

/**
 * git talking to a remote: no password prompt, and only the transports `nas remote add` accepts, so a URL that
 * reached the Store's config some other way still runs no remote helper (`<helper>::...`) as root.
 */
const REMOTE_GIT = ['-c', 'core.askPass=true', '-c', 'protocol.allow=never',
  ...['https', 'ssh', 'git', 'file'].flatMap((p) => ['-c', `protocol.${p}.allow=always`])];

/** git's fsck refused an object a fetch received: `finding` is its words (`object <id>: <msgId>: <what>`). */
export class FsckRefusal extends Error {
  constructor(readonly finding: string) {
    super(`git's fsck refuses ${finding}`);
    this.name = 'FsckRefusal';
  }
}

/** git on one bare repository (a Home's Store), at `gitDir`. */
export class GitCommands {
  /** git refuses a second gc on a repository while one runs: nasd's own (hourly, maintenance) take turns. */
  private gcQueue: Promise<unknown> = Promise.resolve();

  constructor(private readonly gitDir: string) {}

  /**
   * Hash the file an open descriptor refers to into the object database, stored uncompressed (packing
   * compresses later): git runs near disk speed where libgit2, which always deflates, does not.
   */
  async hashObject(fd: number): Promise<string> {
    const oid = (await this.run(['-c', 'core.looseCompression=0', 'hash-object', '-w', '--no-filters', '--stdin'], fd)).trim();
    if (!/^[0-9a-f]{40}$/.test(oid)) throw new Error(`git hash-object printed ${JSON.stringify(oid)}`);
    return oid;
  }

  /**
   * Pack loose objects and drop unreachable ones old enough (`git gc --auto`: only when git finds it worth it).
   * Runs as its own process; safe beside nasd's writes (git keeps recent unreachable objects two weeks).
   */
  async gc(): Promise<void> {
    await this.oneGcAtATime(() => this.run(['gc', '--auto', '--quiet']));
  }

  /**
   * Pack every object now and drop unreachable ones older than `pruneAfterSeconds` (never younger than an
   * hour: an object nasd has just written may not be on a ref yet).
   */
  async pack(pruneAfterSeconds: number): Promise<void> {
    await this.oneGcAtATime(() => this.run(['gc', '--quiet', `--prune=${Math.max(3600, Math.floor(pruneAfterSeconds))}.seconds.ago`]));
  }

  private oneGcAtATime<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.gcQueue.then(fn, fn);
    this.gcQueue = next.catch(() => undefined);
    return next;
  }

  /** What the object store holds: loose objects and their bytes, packed objects and the packs' bytes. */
  async objectCounts(): Promise<ObjectCounts> {
    const out = Object.fromEntries((await this.run(['count-objects', '-v'])).split('\n').map((l) => l.split(': ')).filter((kv) => kv.length === 2));
    const n = (key: string) => Number(out[key] ?? 0);
    return { loose: n('count'), looseBytes: n('size') * 1024, packed: n('in-pack'), packBytes: n('size-pack') * 1024 };
  }

  /** Write every ref and everything they reach into one file (a git bundle), which `fetchBundle` reads back. */
  async bundle(file: string): Promise<void> {
    await this.run(['bundle', 'create', '--quiet', file, '--all']);
  }

  /** Take every ref of a bundle as it is (the Store is new and empty); git checks the bundle whole first. */
  async fetchBundle(file: string): Promise<void> {
    await this.run(['bundle', 'verify', '--quiet', file]);
    await this.run(['fetch', '--quiet', '--no-write-fetch-head', file, '+refs/*:refs/*']);
  }

  /** The remotes the Store mirrors to (`nas remote add`), by name: kept in the Store's own git config, never exported. */
  async mirrors(): Promise<Map<string, string>> {
    const out = await this.run(['config', '--get-regexp', '^remote\\.nas-[0-9]+\\.url$']).catch(() => '');
    return new Map(out.split('\n').filter(Boolean).map((l) => {
      const [key, url] = [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)];
      return [key.replace(/^remote\./, '').replace(/\.url$/, ''), url];
    }));
  }

  /** How many refs a remote holds (`git ls-remote`), failing with git's words when it cannot be reached. */
  async remoteRefCount(url: string, timeoutMs: number): Promise<number> {
    return (await this.run([...REMOTE_GIT, 'ls-remote', '--', url], 'ignore', timeoutMs)).split('\n').filter(Boolean).length;
  }

  /**
   * The branch a repository elsewhere names as its default (its HEAD) with all its history, fetched into `ref`
   * (no tags, no other branch): its name there. Only the transports `nas remote add` accepts are used. git's
   * fsck checks every object it receives, strictly (its warnings refuse too); a fetch it refuses writes no ref
   * and fails with an FsckRefusal. Names git takes for `.git` it lets through: the caller refuses those with
   * the commit and path that hold them, which git's fsck cannot name (it knows only the tree).
   */
  async fetchDefaultBranch(url: string, ref: string, timeoutMs: number): Promise<string> {
    const head = await this.run([...REMOTE_GIT, 'ls-remote', '--symref', '--', url, 'HEAD'], 'ignore', timeoutMs);
    const named = /^ref: (refs\/heads\/[^\t\n]+)\tHEAD$/m.exec(head)?.[1];
    if (!named) throw new Error(`${url} names no default branch (its HEAD is not a branch with commits)`);
    const fsck = ['-c', 'fetch.fsckObjects=true', '-c', 'fetch.fsck.hasDotgit=ignore'];
    try {
      await this.run([...REMOTE_GIT, ...fsck, 'fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--', url, `+${named}:${ref}`], 'ignore', timeoutMs);
    } catch (err) {
      const found = /\berror: (object [0-9a-f]{40,64}: [^\n]*)/.exec((err as Error).message)?.[1];
      if (found && /fsck error/.test((err as Error).message)) throw new FsckRefusal(found);
      throw err;
    }
    return named.slice('refs/heads/'.length);
  }

  async addMirror(name: string, url: string): Promise<void> {
    await this.run(['remote', 'add', '--mirror=push', name, url]);
  }

  async removeMirror(name: string): Promise<void> {
    await this.run(['remote', 'remove', name]);
  }

  /** Push every ref to a mirror, removing there what is gone here; stopped after `timeoutMs`. */
  async pushMirror(name: string, timeoutMs: number): Promise<void> {
    await this.run([...REMOTE_GIT, 'push', '--mirror', '--quiet', name], 'ignore', timeoutMs);
  }

  /** Install (or replace) a hook script of the repository; written aside and renamed, so git never runs half a script. */
  async installHook(name: string, script: string): Promise<void> {
    const file = `${this.gitDir}/hooks/${name}`;
    if ((await fs.readFile(file, 'utf8').catch(() => null)) === script) return;
    await fs.mkdir(`${this.gitDir}/hooks`, { recursive: true });
    await fs.writeFile(`${file}.tmp`, script, { mode: 0o755 });
    await fs.rename(`${file}.tmp`, file);
  }

  /** One trailer's values on every commit of a ref's first-parent line, newest first ('' where a commit has none). */
  async firstParentTrailers(ref: string, key: string): Promise<string[]> {
    return (await this.run(['log', '--first-parent', `--format=%(trailers:key=${key},valueonly,separator=%x2C)%x00`, ref])).split('\0').map((t) => t.trim()).slice(0, -1);
  }

  /** Every path of a commit's tree, folders included ('ls-tree -r -t'). */
  async treePaths(commit: string): Promise<string[]> {
    return (await this.run(['ls-tree', '-r', '-t', '-z', '--name-only', commit])).split('\0').slice(0, -1);
  }

  /**
   * The paths each commit of a first-parent line changed against its first parent (a merge: what it brought into
   * the line), folders included, newest commit first, each with the commit's time: `git log` of `revs` (a head,
   * and `^<commit>` to stop there), streamed. `visit` returns false to stop early (git is stopped then).
   */
  firstParentPaths(revs: string[], visit: (time: number, path: string) => boolean): Promise<void> {
    // Whatever root's git config says: the root commit's own paths (--root), no renames, paths from the top.
    const args = ['log', '--root', '--first-parent', '--diff-merges=first-parent', '--no-renames', '--no-relative', '--no-show-signature', '-t', '--name-only', '-z', '--format=%x01%ct', ...revs, '--'];
    // A range (`^<commit>`: a table brought forward after a merge, on every host at every move of main) is a few
    // lines: started by the spawner, read whole. A whole history is streamed.
    if (revs.some((r) => r.startsWith('^'))) return this.firstParentPathsWhole(args, visit);
    return this.firstParentPathsStreamed(args, visit);
  }

  private async firstParentPathsWhole(args: string[], visit: (time: number, path: string) => boolean): Promise<void> {
    let ran: Ran;
    try {
      ran = await spawner.run('git', ['--git-dir', this.gitDir, '-c', 'core.quotePath=false', ...args], process.env, 0);
    } catch (err) {
      if (err instanceof SpawnerGone) return this.firstParentPathsStreamed(args, visit);
      throw err;
    }
    if (ran.code !== 0) throw new Error(`git ${args.join(' ')}: ${ran.stderr.trim() || `exit ${ran.code}`}`);
    let time = 0;
    for (const token of ran.stdout.split('\0').slice(0, -1)) {
      const header = /^\x01(\d+)$/.exec(token);
      if (header) time = Number(header[1]);
      else if (!visit(time, token.startsWith('\n') ? token.slice(1) : token)) return;
    }
  }

  private firstParentPathsStreamed(args: string[], visit: (time: number, path: string) => boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn('git', ['--git-dir', this.gitDir, '-c', 'core.quotePath=false', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let rest: Buffer = Buffer.alloc(0);
      let time = 0;
      let stopped = false;
      let err = '';
      child.stdout!.on('data', (d: Buffer) => {
        if (stopped) return;
        const buf = rest.length ? Buffer.concat([rest, d]) : d;
        let start = 0;
        for (let end = buf.indexOf(0, start); end >= 0; start = end + 1, end = buf.indexOf(0, start)) {
          // A commit's line is "\x01<time>"; its first path follows a newline.
          const token = buf.toString('utf8', start, end);
          const header = /^\x01(\d+)$/.exec(token);
          if (header) time = Number(header[1]);
          else if (!visit(time, token.startsWith('\n') ? token.slice(1) : token)) {
            stopped = true;
            child.kill();
            return;
          }
        }
        rest = buf.subarray(start);
      });
      child.stderr!.on('data', (d) => (err += d));
      child.on('error', reject);
      child.on('close', (code) => {
        if (code === 0 || stopped) resolve();
        else reject(new Error(`git ${args.join(' ')}: ${err.trim() || `exit ${code}`}`));
      });
    });
  }

  /** git fsck of the whole repository: its findings ('' when clean). */
  async fsck(): Promise<string> {
    try {
      await this.run(['fsck', '--no-progress', '--no-dangling']);
      return '';
    } catch (err) {
      return (err as Error).message;
    }
  }

  /**
   * git talking to the cluster's git server (src/store/server-repo.ts): the operator's URL, so http:// too (a lab
   * server on a private network); `env` carries the credentials (an ssh key, an HTTP header).
   */
  withServer(args: string[], config: string[], timeoutMs: number, env: NodeJS.ProcessEnv = {}): Promise<string> {
    const transports = ['-c', 'core.askPass=true', '-c', 'protocol.allow=never', ...['https', 'http', 'ssh', 'git', 'file'].flatMap((p) => ['-c', `protocol.${p}.allow=always`])];
    return this.runHelped([...transports, ...config, ...args], timeoutMs, env);
  }

  /** As run(), started by the spawner (src/util/spawner.ts) so that nasd's thread does not wait on the fork; by nasd without it. */
  private async runHelped(args: string[], timeoutMs: number, extraEnv: NodeJS.ProcessEnv): Promise<string> {
    const env = { ...process.env, GIT_TERMINAL_PROMPT: '0', ...extraEnv };
    let ran: Ran;
    try {
      ran = await spawner.run('git', ['--git-dir', this.gitDir, ...args], env, timeoutMs);
    } catch (err) {
      // The call never reached the helper: run here. The helper died with it under way (SpawnerDied): it may have
      // run (a push on the server), so it is not run again but failed; the caller's retry reads the server anew.
      if (err instanceof SpawnerGone) return this.run(args, 'ignore', timeoutMs, extraEnv);
      throw new Error(`git ${args.join(' ')}: ${(err as Error).message}`);
    }
    if (ran.code === 0) return ran.stdout;
    throw new Error(`git ${args.join(' ')}: ${ran.stderr.trim() || (ran.signal ? `stopped after ${timeoutMs / 1000} s` : `exit ${ran.code}`)}`);
  }

  /** Run git on the repository as its own process: its stdout, or an error with git's own words (killed after `timeoutMs`). */
  private run(args: string[], stdin: 'ignore' | number = 'ignore', timeoutMs = 0, extraEnv: NodeJS.ProcessEnv = {}): Promise<string> {
    return new Promise((resolve, reject) => {
      // No terminal prompts: a remote that wants a password fails instead of waiting forever.
      const env = { ...process.env, GIT_TERMINAL_PROMPT: '0', ...extraEnv };
      // With a deadline, a process group of its own, killed whole: git's transport helper (git-remote-http, ssh)
      // waiting on a dead network would otherwise hold the pipes, and the call, open for minutes.
      const child = spawn('git', ['--git-dir', this.gitDir, ...args], { stdio: [stdin, 'pipe', 'pipe'], env, detached: timeoutMs > 0 });
      let out = '';
      let err = '';
      const kill = () => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          child.kill('SIGKILL');
        }
      };
      const timer = timeoutMs > 0 ? setTimeout(kill, timeoutMs) : undefined;
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (err += d));
      child.on('error', reject);
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve(out);
        else reject(new Error(`git ${args.join(' ')}: ${err.trim() || (signal ? `stopped after ${timeoutMs / 1000} s` : `exit ${code}`)}`));
      });
    });
  }
}
