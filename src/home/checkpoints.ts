import { UserError } from '../util/errors.js';
import { validateRefName } from '../util/names.js';
import { RefConflict, type Identity, type Store } from '../store/store.js';
import { CHECKPOINT_RECORDS_REF, checkpointRef } from '../store/refs.js';
import { YamlRecords } from '../store/yaml-records.js';

/**
 * Checkpoints: a named commit of a branch (or main), kept by its own ref so nothing can lose it. Immutable:
 * made once, never moved; only the owner removes one. The record says what, from where, by whom, when, why.
 */
export interface Checkpoint {
  name: string;
  commit: string;
  /** The branch it was taken of (`main` for main). */
  branch: string;
  created: string;
  by: string;
  message?: string;
}

export function validateCheckpointName(name: string): string {
  validateRefName(name, 'checkpoint');
  // `<role>:<hex>` under the mount root and `nas restore <hex>` read a commit id.
  if (/^[0-9a-f]{4,40}$/.test(name)) throw new UserError(`invalid checkpoint name "${name}": it reads as a commit id; add a letter beyond a-f`);
  return name;
}

export class Checkpoints {
  private readonly records: YamlRecords<Checkpoint>;

  constructor(private readonly store: Store, identity: Identity) {
    this.records = new YamlRecords(store, CHECKPOINT_RECORDS_REF, identity);
  }

  async list(): Promise<Checkpoint[]> {
    return (await this.records.list()).sort((a, b) => (a.created < b.created ? -1 : a.created > b.created ? 1 : 0));
  }

  get(name: string): Promise<Checkpoint | undefined> {
    return this.records.get(validateCheckpointName(name));
  }

  async create(c: Omit<Checkpoint, 'created'>): Promise<Checkpoint> {
    validateCheckpointName(c.name);
    try {
      await this.store.updateRef(checkpointRef(c.name), c.commit, null, `checkpoint ${c.name}`);
    } catch (e) {
      if (e instanceof RefConflict) throw new UserError(`checkpoint "${c.name}" exists already (checkpoints never move); choose another name`, 409);
      throw e;
    }
    const checkpoint: Checkpoint = { ...c, created: new Date().toISOString() };
    await this.records.put(c.name, checkpoint, `checkpoint ${c.name}: ${c.branch} at ${c.commit.slice(0, 12)}`);
    return checkpoint;
  }

  async delete(name: string): Promise<Checkpoint> {
    const checkpoint = await this.get(name);
    if (!checkpoint) throw new UserError(`no checkpoint "${name}"; see nas checkpoint list`, 404);
    await this.store.deleteRef(checkpointRef(name), checkpoint.commit);
    await this.records.remove(name, `delete checkpoint ${name}`);
    return checkpoint;
  }
}
