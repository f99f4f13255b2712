import NodeGit from 'nodegit';
import { oneWriter } from './one-writer.js';

/**
 * A Store's objects as git stores them (type and content), in and out: for the objects a cluster sends through
 * etcd beside a proposal or a merge (src/cluster/objects.ts). A written object's id is git's hash of it, so what
 * is written is what its id says.
 */
export class RawObjects {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  constructor(private readonly odb: any) {}

  async read(oid: string): Promise<{ type: number; data: Buffer }> {
    const obj = await this.odb.read(NodeGit.Oid.fromString(oid));
    return { type: obj.type() as number, data: Buffer.from(obj.data().toBuffer(obj.size())) };
  }

  async has(oid: string): Promise<boolean> {
    try {
      await this.odb.existsPrefix(NodeGit.Oid.fromString(oid), 40);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Store an object given as text (a commit: nodegit's raw write takes a string, so only text that is UTF-8 as
   * it stands); its id. Blobs and trees go through Store.writeBlob and writeTree.
   */
  async writeText(type: number, data: Buffer): Promise<string | null> {
    const text = data.toString('utf8');
    if (!Buffer.from(text, 'utf8').equals(data)) return null;
    const oid = await oneWriter(() => this.odb.write(text, data.length, type));
    return (oid as { tostrS(): string }).tostrS();
  }
}
