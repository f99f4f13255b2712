import fs from 'node:fs/promises';
import type { StatusReport } from '../api/types.js';
import { version } from '../util/version.js';
import type { Homes } from './homes.js';
import type { PrService } from './prs.js';
import type { Replicator } from './remotes.js';

/** Below this share of free space on the state directory's disk, `nas status` says so (commits and deletes need room). */
const LOW_DISK = 0.05;

/**
 * `nas status`: what nasd serves, which version since when, what waits for a person in each Home, and every
 * problem an operator should act on in one list: `.nas/` files that could not be read, mirrors that fail, a
 * nearly full disk. Only counts and names: the details are behind the commands each problem names.
 */
export async function statusReport(homes: Homes, prs: PrService, remotes: Replicator): Promise<StatusReport> {
  const base = homes.status();
  const waiting = new Map<string, number>();
  for (const d of await prs.decisions()) if (d.state === 'waiting') waiting.set(d.home, (waiting.get(d.home) ?? 0) + 1);
  const problems: string[] = [];
  for (const h of base.homes) {
    for (const p of h.problems) problems.push(`Home ${h.role}: ${p}`);
    if (h.state === 'archived') continue;
    // What cannot be read is a problem of its own: status is what an operator runs when something is wrong.
    const health = await remotes.health(h.role).catch((err) => {
      problems.push(`Home ${h.role}: its remotes cannot be read (${(err as Error).message})`);
      return [];
    });
    for (const r of health) {
      if (r.failures === 0) continue;
      const since = r.pushed ? `; last good push ${new Date(r.pushed).toISOString()}` : '';
      problems.push(`Home ${h.role}: mirroring to remote ${r.name} failed ${r.failures} time(s) in a row${since} (nas remote list ${h.role})`);
    }
  }
  const disk = await fs.statfs(base.state_dir).catch(() => null);
  if (disk && disk.blocks > 0 && disk.bavail / disk.blocks < LOW_DISK) {
    problems.push(`the disk of ${base.state_dir} is ${Math.round(100 - (100 * disk.bavail) / disk.blocks)}% full: commits and deletes need room there`);
  }
  return {
    ...base,
    version: version(),
    started: new Date(Date.now() - process.uptime() * 1000).toISOString(),
    homes: base.homes.map((h) => ({ ...h, waiting: waiting.get(h.role) ?? 0 })),
    problems,
  };
}
