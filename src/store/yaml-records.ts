import yaml from 'js-yaml';
import { mapLimit } from '../util/concurrency.js';
import { MODE, type Identity, type Store } from './store.js';

/**
 * Records kept as plain YAML files (`<id>.yaml`) in the tree of a metadata ref (refs/nas/leases, refs/nas/runs):
 * each write is a commit on that ref, so their history is git's.
 */
export class YamlRecords<T> {
  constructor(private readonly store: Store, private readonly ref: string, private readonly identity: Identity) {}

  async list(): Promise<T[]> {
    const head = await this.store.readRef(this.ref);
    if (!head) return [];
    const tree = await this.store.readTree((await this.store.readCommit(head)).tree);
    return mapLimit([...tree.values()], 16, (e) => this.parse(e.oid));
  }

  async get(id: string): Promise<T | undefined> {
    const head = await this.store.readRef(this.ref);
    if (!head) return undefined;
    const entry = await this.store.lookupPath((await this.store.readCommit(head)).tree, `${id}.yaml`);
    return entry ? this.parse(entry.oid) : undefined;
  }

  async remove(id: string, message: string): Promise<void> {
    await this.store.commitToRef(this.ref, async (tree) => (tree && (await this.store.lookupPath(tree, `${id}.yaml`)) ? new Map([[`${id}.yaml`, null]]) : null), message, this.identity);
  }

  async put(id: string, record: T, message: string): Promise<void> {
    const oid = await this.store.writeBlob(yaml.dump(record));
    await this.store.commitToRef(this.ref, async () => new Map([[`${id}.yaml`, { oid, mode: MODE.file }]]), message, this.identity);
  }

  /**
   * A record by its blob. Blobs never change, so each is read and parsed once: a listing of a Home with
   * thousands of leases or runs reads only the records written since the last one (every run lists them).
   */
  private async parse(oid: string): Promise<T> {
    let record = PARSED.get(oid);
    if (record === undefined) {
      record = yaml.load((await this.store.readBlob(oid)).toString());
      if (PARSED.size >= PARSED_MAX) PARSED.delete(PARSED.keys().next().value!);
      PARSED.set(oid, record);
    }
    // A copy: callers change what they get (a lease's revocation, a run's end).
    return structuredClone(record) as T;
  }
}

/** Parsed records by blob oid, across Homes (an oid names the same content in every Store); the oldest go first. */
const PARSED = new Map<string, unknown>();
const PARSED_MAX = 50_000;
