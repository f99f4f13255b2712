import fs from 'node:fs/promises';
import { exists } from '../util/exists.js';
import { UserError } from '../util/errors.js';
import { validateRole } from '../util/names.js';
import type { Identity, Store } from '../store/store.js';
import { LIFECYCLE_REF } from '../store/refs.js';
import { YamlRecords } from '../store/yaml-records.js';
import { Home } from './home.js';

/**
 * A Home's life after its first day. Archived: its Store moves to `<state>/archive/<role>.git`, unmounted and
 * kept as it is, until unarchived. Retired: still mounted and readable, no new branches, and a record naming
 * its successor (the successor's record names its predecessor).
 */
export interface LifecycleRecord {
  retired?: { successor: string; at: string; by: string; pr?: number };
  predecessor?: { role: string; at: string };
}

export class Lifecycle {
  private readonly records: YamlRecords<LifecycleRecord>;

  constructor(store: Store, identity: Identity) {
    this.records = new YamlRecords(store, LIFECYCLE_REF, identity);
  }

  async get(): Promise<LifecycleRecord> {
    return (await this.records.get('home')) ?? {};
  }

  async update(change: Partial<LifecycleRecord>, message: string): Promise<LifecycleRecord> {
    const record = { ...(await this.get()), ...change };
    await this.records.put('home', record, message);
    return record;
  }
}

export const archiveDirFor = (stateDir: string, role: string): string => `${stateDir}/archive/${validateRole(role)}.git`;

/** Archived Homes, by role. */
export async function listArchived(stateDir: string): Promise<string[]> {
  const names = await fs.readdir(`${stateDir}/archive`).catch(() => [] as string[]);
  return names.filter((n) => n.endsWith('.git')).map((n) => n.slice(0, -4)).sort();
}

/** Move a Home's Store out of the served set (the caller has closed its views). */
export async function moveToArchive(stateDir: string, role: string): Promise<string> {
  const to = archiveDirFor(stateDir, role);
  if (await exists(to)) throw new UserError(`an archived Home "${role}" exists already; unarchive or remove it first`, 409);
  await fs.mkdir(`${stateDir}/archive`, { recursive: true, mode: 0o700 });
  await fs.rename(Home.dirFor(stateDir, role), to);
  return to;
}

/** Bring an archived Home's Store back into the served set. */
export async function moveFromArchive(stateDir: string, role: string): Promise<void> {
  const from = archiveDirFor(stateDir, role);
  if (!(await exists(from))) throw new UserError(`no archived Home named "${role}"; see nas home list`, 404);
  if (await exists(Home.dirFor(stateDir, role))) throw new UserError(`a Home named "${role}" is served already; it cannot be unarchived over it`, 409);
  await fs.rename(from, Home.dirFor(stateDir, role));
}
