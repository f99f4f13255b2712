import yaml from 'js-yaml';
import { randomBytes } from 'node:crypto';
import { MODE, type Identity, type Store } from '../store/store.js';
import { RUNS_REF } from '../store/refs.js';
import { mapLimit } from '../util/concurrency.js';

/**
 * Runs (`nas run`): one command on its own branch with its own lease. Each run's record is plain YAML in
 * the Home's Store under refs/nas/runs (`<id>.yaml`), written when it starts and when it ends.
 */

/**
 * running: the command is alive; exited: it ended on its own (any status); killed: by a signal, or its
 * launcher died; interrupted: nasd restarted while it ran (its mount was lost); failed-to-start: the command
 * never ran (its branch was removed).
 */
export type RunState = 'running' | 'exited' | 'killed' | 'interrupted' | 'failed-to-start';

export interface RunRecord {
  id: string;
  home: string;
  branch: string;
  /** Attempts started together share a task id (`nas run --attempts N`). */
  task?: string;
  intent?: string;
  user: string;
  uid: number;
  command: string[];
  cwd: string;
  lease: string;
  started: string;
  state: RunState;
  ended?: string;
  /** The command's exit status, or 128 + the signal's number when a signal ended it. */
  exit?: number;
  signal?: string;
  /** The PR the run's work became, and that PR's state when the run ended. */
  pr?: number;
  pr_state?: string;
  /** Why the run was not proposed, or what went wrong at its end. */
  note?: string;
  /** Set by `nas run pick`: the attempt chosen, or discarded. */
  picked?: 'chosen' | 'discarded';
}

export const newRunId = (): string => `r${randomBytes(4).toString('hex')}`;
export const newTaskId = (): string => `t${randomBytes(4).toString('hex')}`;
export const runBranch = (id: string): string => `run-${id}`;

export class RunStore {
  constructor(private readonly store: Store, private readonly identity: Identity) {}

  async list(): Promise<RunRecord[]> {
    const head = await this.store.readRef(RUNS_REF);
    if (!head) return [];
    const tree = await this.store.readTree((await this.store.readCommit(head)).tree);
    const runs = await mapLimit([...tree.values()], 16, async (e) => yaml.load((await this.store.readBlob(e.oid)).toString()) as RunRecord);
    return runs.sort((a, b) => (a.started < b.started ? -1 : a.started > b.started ? 1 : 0));
  }

  async get(id: string): Promise<RunRecord | undefined> {
    if (!/^r[0-9a-f]{8}$/.test(id)) return undefined;
    const head = await this.store.readRef(RUNS_REF);
    if (!head) return undefined;
    const entry = await this.store.lookupPath((await this.store.readCommit(head)).tree, `${id}.yaml`);
    return entry ? (yaml.load((await this.store.readBlob(entry.oid)).toString()) as RunRecord) : undefined;
  }

  async write(run: RunRecord, message: string): Promise<void> {
    const oid = await this.store.writeBlob(yaml.dump(run));
    await this.store.commitToRef(RUNS_REF, async () => new Map([[`${run.id}.yaml`, { oid, mode: MODE.file }]]), message, this.identity);
  }
}
