import fs from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { hasCode } from '../../util/errors.js';

/**
 * What a run read through its branch view: each path with the blob version it saw, recorded when a file
 * that comes from git is opened. Kept on disk (`reads.jsonl` beside the upper directory) before the open
 * is answered, so a crash cannot hide a read; a PR carries the manifest and its digest.
 */
export class ReadManifest {
  private readonly seen = new Map<string, Set<string>>();
  /** Opened once in append mode: a record costs one write, not an open, a write and a close. */
  private out?: Promise<fs.FileHandle>;

  private constructor(private readonly file: string) {}

  static async open(file: string): Promise<ReadManifest> {
    const m = new ReadManifest(file);
    let text = '';
    try {
      text = await fs.readFile(file, 'utf8');
    } catch (e) {
      if (!hasCode(e, 'ENOENT')) throw e;
    }
    for (const line of text.split('\n')) {
      try {
        const { p, o } = JSON.parse(line) as { p: string; o: string };
        m.remember(p, o);
      } catch {
        // A line cut short by a crash: the open it belonged to was never answered.
      }
    }
    return m;
  }

  private remember(path: string, oid: string): boolean {
    const oids = this.seen.get(path) ?? new Set<string>();
    if (oids.has(oid)) return false;
    this.seen.set(path, oids.add(oid));
    return true;
  }

  async record(path: string, oid: string): Promise<void> {
    if (!this.remember(path, oid)) return;
    this.out ??= fs.open(this.file, 'a', 0o600);
    await (await this.out).write(`${JSON.stringify({ p: path, o: oid })}\n`);
  }

  async close(): Promise<void> {
    const out = this.out;
    this.out = undefined;
    await (await out)?.close();
  }

  /** One line per read, `<blob id> <path>`, sorted: the text the digest is taken of. */
  text(): string {
    const lines: string[] = [];
    for (const [path, oids] of this.seen) for (const oid of oids) lines.push(`${oid} ${path}\n`);
    return lines.sort().join('');
  }

  paths(): string[] {
    return [...this.seen.keys()].sort();
  }

  digest(): string {
    return `sha256:${createHash('sha256').update(this.text()).digest('hex')}`;
  }
}
