import fs from 'node:fs/promises';
import { gunzip, gzip } from 'node:zlib';
import { promisify } from 'node:util';
import type { GitCommands } from './git-commands.js';
import type { CommitInfo, Entry } from './types.js';

const FORMAT = 'nas last-change table 1';
let saves = 0;

/** The folders above a '/'-separated path, nearest first ('a/b/c': 'a/b', 'a'). */
function* foldersAbove(path: string): Generator<string> {
  for (let i = path.lastIndexOf('/'); i > 0; i = path.lastIndexOf('/', i - 1)) yield path.slice(0, i);
}

/**
 * When every path of one commit's tree (files and folders) last changed, in seconds since the epoch: the time of
 * the newest commit of its first-parent line that listed the path, or anything below it, against its first parent
 * (git log --first-parent --diff-merges=first-parent). One entry per path of the tree, nothing per commit, so it
 * costs what the tree does whatever the depth of the history.
 */
export class ChangeTable {
  constructor(readonly commit: string, readonly times: ReadonlyMap<string, number>) {}

  /** The table of `commit`, in one pass over its first-parent history, stopped once every path has its time. */
  static async build(git: GitCommands, commit: string): Promise<ChangeTable> {
    const pending = new Set(await git.treePaths(commit));
    const times = new Map<string, number>();
    let oldest = 0;
    const found = (path: string, time: number) => {
      if (pending.delete(path)) times.set(path, time);
    };
    if (pending.size > 0) {
      await git.firstParentPaths([commit], (time, path) => {
        found(path, time);
        for (const folder of foldersAbove(path)) found(folder, time);
        oldest = time;
        return pending.size > 0;
      });
    }
    // Only a history git could not list entirely leaves a path here: it is as old as the oldest commit read.
    for (const path of pending) times.set(path, oldest);
    return new ChangeTable(commit, times);
  }

  /**
   * The table of `to`, a commit whose first-parent line passes through this table's commit: this table with the
   * paths the commits between them changed (their folders too) moved to the newest of those commits' times, and
   * the paths they deleted gone. Costs what those commits changed, not the tree.
   */
  async advance(git: GitCommands, to: CommitInfo, lookup: (tree: string, path: string) => Promise<Entry | null>): Promise<ChangeTable> {
    const changed = new Map<string, number>();
    await git.firstParentPaths([to.oid, `^${this.commit}`], (time, path) => {
      if (changed.has(path)) return true;
      changed.set(path, time);
      // A folder already listed had its own folders listed with it, at the same or a newer time.
      for (const folder of foldersAbove(path)) {
        if (changed.has(folder)) break;
        changed.set(folder, time);
      }
      return true;
    });
    const times = new Map(this.times);
    for (const [path, time] of changed) {
      if (await lookup(to.tree, path)) times.set(path, time);
      else times.delete(path);
    }
    return new ChangeTable(to.oid, times);
  }

  /** Written aside and renamed, gzipped: one line naming the commit, then `<time> <path>` NUL-separated, paths sorted. */
  async save(file: string): Promise<void> {
    const lines = [...this.times.keys()].sort().map((path) => `${this.times.get(path)} ${path}\0`);
    const tmp = `${file}.${process.pid}.${++saves}.tmp`;
    await fs.writeFile(tmp, await promisify(gzip)(`${FORMAT} ${this.commit}\n${lines.join('')}`));
    await fs.rename(tmp, file);
  }

  /** The table a save left, or null when there is none or it is not one this code wrote. */
  static async load(file: string): Promise<ChangeTable | null> {
    const raw = await fs.readFile(file).catch(() => null);
    const text = raw && (await promisify(gunzip)(raw).catch(() => null))?.toString('utf8');
    const head = text ? new RegExp(`^${FORMAT} ([0-9a-f]{40,64})\\n`).exec(text) : null;
    if (!text || !head) return null;
    const times = new Map<string, number>();
    for (const line of text.slice(head[0].length).split('\0').slice(0, -1)) {
      const space = line.indexOf(' ');
      times.set(line.slice(space + 1), Number(line.slice(0, space)));
    }
    return new ChangeTable(head[1], times);
  }
}
