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
    return mapLimit([...tree.values()], 16, async (e) => yaml.load((await this.store.readBlob(e.oid)).toString()) as T);
  }

  async get(id: string): Promise<T | undefined> {
    const head = await this.store.readRef(this.ref);
    if (!head) return undefined;
    const entry = await this.store.lookupPath((await this.store.readCommit(head)).tree, `${id}.yaml`);
    return entry ? (yaml.load((await this.store.readBlob(entry.oid)).toString()) as T) : undefined;
  }

  async remove(id: string, message: string): Promise<void> {
    await this.store.commitToRef(this.ref, async (tree) => (tree && (await this.store.lookupPath(tree, `${id}.yaml`)) ? new Map([[`${id}.yaml`, null]]) : null), message, this.identity);
  }

  async put(id: string, record: T, message: string): Promise<void> {
    const oid = await this.store.writeBlob(yaml.dump(record));
    await this.store.commitToRef(this.ref, async () => new Map([[`${id}.yaml`, { oid, mode: MODE.file }]]), message, this.identity);
  }
}
