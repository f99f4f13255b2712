import fs from 'node:fs/promises';

/** Below this much room a failed write is put down to the disk being full: a commit may need a large object written. */
const NEARLY_FULL_BYTES = 64 * 1024 ** 2;

/** Whether the disk that holds dir has (nearly) no room left for an unprivileged writer. */
export async function nearlyFull(dir: string): Promise<boolean> {
  const s = await fs.statfs(dir).catch(() => null);
  return s !== null && s.bavail * s.bsize < NEARLY_FULL_BYTES;
}
