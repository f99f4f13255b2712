import type { Tree } from './types.js';

/**
 * Parsed trees by id, least recently used first out, bounded by the number of entries held (not trees):
 * one 10,000-entry directory weighs as much as a thousand small ones.
 */
export class TreeCache {
  private readonly trees = new Map<string, Tree>();
  private entries = 0;

  constructor(private readonly maxEntries: number) {}

  get(oid: string): Tree | undefined {
    const tree = this.trees.get(oid);
    if (tree) {
      this.trees.delete(oid);
      this.trees.set(oid, tree);
    }
    return tree;
  }

  set(oid: string, tree: Tree): void {
    if (this.trees.has(oid)) return;
    this.trees.set(oid, tree);
    this.entries += tree.size;
    for (const [old, t] of this.trees) {
      if (this.entries <= this.maxEntries || old === oid) break;
      this.trees.delete(old);
      this.entries -= t.size;
    }
  }
}

/** Parse git's raw tree format: `<octal mode> <name>\0<20-byte id>` repeated. */
export function parseTree(raw: Buffer): Map<string, { oid: string; mode: number }> {
  const out = new Map<string, { oid: string; mode: number }>();
  let i = 0;
  while (i < raw.length) {
    const space = raw.indexOf(0x20, i);
    const nul = raw.indexOf(0, space);
    const mode = parseInt(raw.toString('latin1', i, space), 8);
    out.set(raw.toString('utf8', space + 1, nul), { oid: raw.toString('hex', nul + 1, nul + 21), mode });
    i = nul + 21;
  }
  return out;
}
