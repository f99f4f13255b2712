import type { GitCommands } from './git-commands.js';

/**
 * A Home's repository on the cluster's git server (the truth every host follows: src/cluster): what is there
 * (ls-remote), fetching refs into the Store, and pushes that are compare-and-swap (`--force-with-lease` with
 * the value expected), so git itself refuses a writer that lost its election. Every call has a deadline.
 */

/** How nasd reaches the server: an ssh key (ssh:// URLs) or a file holding an HTTP token (https://), and the deadline. */
export interface ServerAccess {
  key?: string;
  tokenFile?: string;
  timeoutMs: number;
}

/** The server did not hold what a push expected: another writer moved the ref first. */
export class StalePush extends Error {
  constructor(readonly refs: string[], detail: string) {
    super(`the git server refused the push of ${refs.join(', ')}: it no longer holds what this host expected (${detail})`);
    this.name = 'StalePush';
  }
}

/**
 * A fetch from the server: no tags, no FETCH_HEAD, and no `git maintenance --auto` after each one (a process per
 * fetch, and a follower fetches at every merge): nasd runs gc on its Stores itself (workflows/maintenance.ts).
 */
const FETCH = ['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--no-auto-maintenance'];

export class ServerRepo {
  constructor(private readonly git: GitCommands, readonly url: string, private readonly access: ServerAccess) {}

  /** The credentials, in git's environment (never on its command line, where another user's ps would see them). */
  private async env(): Promise<NodeJS.ProcessEnv> {
    const env: NodeJS.ProcessEnv = {};
    if (this.access.key) env.GIT_SSH_COMMAND = `ssh -i '${this.access.key.replace(/'/g, '')}' -o IdentitiesOnly=yes -o BatchMode=yes`;
    if (this.access.tokenFile) {
      const { readFile } = await import('node:fs/promises');
      const token = (await readFile(this.access.tokenFile, 'utf8')).trim();
      Object.assign(env, { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.extraHeader', GIT_CONFIG_VALUE_0: `Authorization: Bearer ${token}` });
    }
    return env;
  }

  private async git_(args: string[]): Promise<string> {
    try {
      return await this.git.withServer(args, [], this.access.timeoutMs, await this.env());
    } catch (err) {
      // git's words without the -c settings nasd adds.
      throw new Error((err as Error).message.replace(/^git (?:-c \S+ )+/, 'git '));
    }
  }

  /** Every ref the server holds under `prefix` (all of them without one), with its commit. */
  async refs(...patterns: string[]): Promise<Map<string, string>> {
    const out = await this.git_(['ls-remote', '--', this.url, ...patterns]);
    return new Map(out.split('\n').filter(Boolean).map((l) => {
      const [oid, ref] = l.split('\t');
      return [ref, oid];
    }));
  }

  /** Fetch `server ref -> local ref` pairs, forced (the server is the truth for these refs). */
  async fetch(pairs: [string, string][]): Promise<void> {
    if (pairs.length === 0) return;
    await this.git_([...FETCH, '--', this.url, ...pairs.map(([from, to]) => `+${from}:${to}`)]);
  }

  /**
   * main and the PR records from the server, forced, in one round trip (the record ref is absent until the first
   * PR: then main alone). What they were before the fetch is returned, as the server had them.
   */
  async fetchMain(main: string, records: string): Promise<void> {
    try {
      await this.fetch([[main, main], [records, records]]);
    } catch (err) {
      if (!/couldn't find remote ref/.test((err as Error).message)) throw err;
      await this.fetch([[main, main]]);
    }
  }

  /** Fetch commits by their ids (protocol v2 serves any reachable commit), for a proposal whose ref moved on. */
  async fetchCommits(oids: string[]): Promise<void> {
    if (oids.length > 0) await this.git_([...FETCH, '--', this.url, ...oids]);
  }

  /** This Store's side, for `nas cluster verify`: a trailer along a ref's first parents, and git fsck's findings. */
  trailers(ref: string, key: string): Promise<string[]> {
    return this.git.firstParentTrailers(ref, key);
  }

  fsck(): Promise<string> {
    return this.git.fsck();
  }

  /**
   * Push `local -> server ref` pairs, each only if the server still holds `expected` there (null: the ref must
   * not exist). All or nothing (`--atomic`). A refusal because a ref moved is a StalePush; anything else
   * (unreachable, denied) an Error with git's words.
   */
  async push(updates: { from: string | null; to: string; expected: string | null | 'any' }[]): Promise<void> {
    if (updates.length === 0) return;
    const leases = updates.filter((u) => u.expected !== 'any').map((u) => `--force-with-lease=${u.to}:${u.expected ?? ''}`);
    const specs = updates.map((u) => `${u.expected === 'any' ? '+' : ''}${u.from ?? ''}:${u.to}`);
    try {
      // Not --porcelain: it moves the `[rejected] ... (stale info)` lines to stdout, and a refusal would not read as one.
      await this.git_(['push', '--quiet', ...(updates.length > 1 ? ['--atomic'] : []), ...leases, '--', this.url, ...specs]);
    } catch (err) {
      const text = (err as Error).message;
      if (/stale info|\[rejected\]|fetch first|non-fast-forward|atomic push failed/.test(text)) throw new StalePush(updates.map((u) => u.to), text.split('\n').slice(-3).join(' '));
      throw err;
    }
  }
}
