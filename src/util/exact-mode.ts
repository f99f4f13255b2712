import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * nasd runs with umask 077 (daemon/main.ts): what it makes is its own unless it says otherwise. A mode passed to
 * mkdir or open is masked by it, so what others must reach (the control socket's directory, the runs' sockets,
 * a check's files) gets its mode set after it is made, exactly.
 */

/** mkdir -p: dir given exactly `mode`, each folder above it that it makes `parents`; what existed is left as it is. */
export async function mkdirExact(dir: string, mode: number, parents = mode): Promise<void> {
  const first = await fs.mkdir(dir, { recursive: true, mode });
  if (first === undefined) return;
  // Every directory from dir up to the first one made is new.
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    await fs.chmod(d, d === path.resolve(dir) ? mode : parents);
    if (d === path.resolve(first) || d === path.dirname(d)) break;
  }
}

/** A directory that is one: whatever else stands there (a symlink swapped in) is replaced. */
export async function realDirectory(dir: string): Promise<void> {
  const st = await fs.lstat(dir).catch(() => null);
  if (st && !st.isDirectory()) await fs.rm(dir, { force: true });
  await fs.mkdir(dir, { recursive: true });
}

/** A new file (or one replaced whole) with exactly this mode. */
export async function writeFileExact(file: string, data: string | Buffer, mode: number): Promise<void> {
  await fs.writeFile(file, data, { mode });
  await fs.chmod(file, mode);
}
