import fs from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { UserError } from '../util/errors.js';
import type { OpenFileLimits } from '../fuse-ops/open-files.js';
import type { DaemonConfig } from './config.js';

const run = promisify(execFile);

/** RLIMIT_NOFILE of this process, from /proc/self/limits ("unlimited" is Infinity). */
async function nofile(): Promise<{ soft: number; hard: number }> {
  const line = (await fs.readFile('/proc/self/limits', 'utf8')).split('\n').find((l) => l.startsWith('Max open files'));
  const [soft, hard] = (line?.slice('Max open files'.length).trim().split(/\s+/) ?? []).map((v) => (v === 'unlimited' ? Infinity : Number(v)));
  if (!(soft > 0) || !(hard > 0)) throw new Error(`cannot read RLIMIT_NOFILE from /proc/self/limits: ${JSON.stringify(line)}`);
  return { soft, hard };
}

/**
 * The caps on files open through the mount. nasd's own descriptor limit is as high as it may be: Node raises its
 * soft RLIMIT_NOFILE to the hard one as it starts (node.cc, PlatformInit), the systemd unit sets the hard one
 * (LimitNOFILE=), and should the soft one still be lower, prlimit(1) raises it (Node has no setrlimit). Files
 * open through the mount then stop `open_files_reserve` below it, so commits, git and the sockets always have some.
 */
export async function openFileLimits(config: DaemonConfig, log: Logger): Promise<OpenFileLimits> {
  let limit = await nofile();
  if (limit.soft < limit.hard) {
    const hard = limit.hard === Infinity ? 'unlimited' : String(limit.hard);
    await run('prlimit', ['--pid', String(process.pid), `--nofile=${hard}:${hard}`]).catch((err) => log.warn({ err }, 'cannot raise the soft RLIMIT_NOFILE to the hard one'));
    limit = await nofile();
  }
  // Each file open through the mount on disk holds two descriptors: JS's and the binding's duplicate it reads through.
  const total = Math.floor((Math.min(limit.soft, 1 << 30) - config.open_files_reserve) / 2);
  if (total < 1) {
    throw new UserError(`open_files_reserve (${config.open_files_reserve}) leaves no descriptors for files opened through the mount: nasd may open ${limit.soft} (RLIMIT_NOFILE); raise LimitNOFILE= (ulimit -n) or lower open_files_reserve`);
  }
  const limits = { perUser: config.open_files_per_user, perView: config.open_files_per_branch, total };
  log.info({ nofile: limit.soft, reserve: config.open_files_reserve, ...limits }, 'open-file caps');
  return limits;
}
