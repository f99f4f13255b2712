import { randomBytes } from 'node:crypto';
import type { Identity, Store } from '../store/store.js';
import { RUNS_REF } from '../store/refs.js';
import { YamlRecords } from '../store/yaml-records.js';

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
  /**
   * Whether the run had the host's network (its lease's egress scope, `nas run --egress`); without it, a network
   * namespace with loopback only. Absent on runs recorded before egress was a scope.
   */
  egress?: boolean;
  started: string;
  state: RunState;
  ended?: string;
  /** The command's exit status, or 128 + the signal's number when a signal ended it. */
  exit?: number;
  signal?: string;
  /** The PR the run's work became, and that PR's state when the run ended (`nas run list` shows its state now). */
  pr?: number;
  pr_state?: string;
  /** Why the run was not proposed, or what went wrong at its end. */
  note?: string;
  /** Its branch was removed when the run ended (or was picked), and why: its PR merged, or it changed nothing. */
  branch_removed?: string;
  /** Set by `nas run pick`: the attempt chosen, or discarded. */
  picked?: 'chosen' | 'discarded';
}

export const newRunId = (): string => `r${randomBytes(4).toString('hex')}`;
export const newTaskId = (): string => `t${randomBytes(4).toString('hex')}`;
export const runBranch = (id: string): string => `run-${id}`;

export class RunStore {
  private readonly records: YamlRecords<RunRecord>;

  constructor(store: Store, identity: Identity) {
    this.records = new YamlRecords(store, RUNS_REF, identity);
  }

  async list(): Promise<RunRecord[]> {
    return (await this.records.list()).sort((a, b) => (a.started < b.started ? -1 : a.started > b.started ? 1 : 0));
  }

  async get(id: string): Promise<RunRecord | undefined> {
    return /^r[0-9a-f]{8}$/.test(id) ? this.records.get(id) : undefined;
  }

  write(run: RunRecord, message: string): Promise<void> {
    return this.records.put(run.id, run, message);
  }
}
