/**
 * SIGHUP while nasd starts. Until nasd serves there is nothing to reload, so a SIGHUP then (a reload asked for
 * again, `kill -HUP`, a logrotate postrotate) is counted and otherwise ignored, instead of SIGHUP's default end
 * of the process, which after a reload would close the kernel connection every shell and open file on the mount
 * depends on. main.ts imports this first; between a reload's execve and this module the preloaded guard
 * (native/hup-guard.cc) does the same. nasd.ts takes SIGHUP over once it serves.
 */
let ignored = 0;
const hold = (): void => void ignored++;
process.on('SIGHUP', hold);

// Nothing nasd starts (git, runs, checks) inherits the guard.
const preload = process.env.LD_PRELOAD;
if (preload?.includes('nas-hup-guard.node')) {
  const rest = preload.split(/[ :]+/).filter((lib) => lib && !lib.endsWith('/nas-hup-guard.node'));
  if (rest.length > 0) process.env.LD_PRELOAD = rest.join(' ');
  else delete process.env.LD_PRELOAD;
}

/** Stop holding SIGHUP (the caller listens now); how many came meanwhile. */
export function releaseHup(): number {
  process.off('SIGHUP', hold);
  return ignored;
}
