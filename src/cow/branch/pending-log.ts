import fs from 'node:fs/promises';
import type { TrashRecord } from '../../trash/trash.js';

/**
 * What a branch has deleted since its last commit, on disk so a crash loses none of it: whiteouts (paths
 * hidden from git) and deletions waiting to reach the recycle area (their content parked in `deleted/`).
 * One JSON object a line, appended before the syscall returns, rewritten after each commit. Callers
 * serialise append and rewrite (BranchView's log lock).
 */
export type PendingEntry =
  | { type: 'whiteout'; path: string }
  | { type: 'delete'; record: TrashRecord; whiteout: boolean; parked: boolean };

export class PendingLog {
  /** Kept open for appending: one write per deletion instead of open, write, close. */
  private fd: fs.FileHandle | null = null;

  constructor(readonly file: string) {}

  async append(entries: PendingEntry[]): Promise<void> {
    this.fd ??= await fs.open(this.file, 'a', 0o600);
    await this.fd.write(entries.map((e) => JSON.stringify(e) + '\n').join(''));
  }

  /** Entries in order; a torn last line (crash mid-append) is ignored. */
  async load(): Promise<PendingEntry[]> {
    let text: string;
    try {
      text = await fs.readFile(this.file, 'utf8');
    } catch {
      return [];
    }
    const out: PendingEntry[] = [];
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        out.push(JSON.parse(line) as PendingEntry);
      } catch {
        // torn write
      }
    }
    return out;
  }

  /** Replace the log atomically with the entries still pending. */
  async rewrite(entries: PendingEntry[]): Promise<void> {
    const tmp = `${this.file}.tmp`;
    await fs.writeFile(tmp, entries.map((e) => JSON.stringify(e) + '\n').join(''), { mode: 0o600 });
    await fs.rename(tmp, this.file);
    await this.close();
  }

  async close(): Promise<void> {
    const fd = this.fd;
    this.fd = null;
    await fd?.close();
  }
}
