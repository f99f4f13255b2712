#!/usr/bin/env node
// First of all: a SIGHUP while nasd starts must not end it (held-hup.ts).
import './held-hup.js';
// Entry point of nasd. libuv's thread pool carries every git and disk call a FUSE request makes; its size is
// read when the pool starts, so it is set here, before anything else is loaded.
process.env.UV_THREADPOOL_SIZE ??= '16';
// What nasd makes (Stores, records, logs, sockets) is its own unless it gives a mode: each FUSE request carries its
// caller's umask, which the kernel applies before nasd sees the mode (and nasd keeps that mode exactly:
// cow/branch/ownership.ts reads this umask when loaded, so it is set before anything else is imported).
process.umask(0o077);
// The log is JSON lines: Node's deprecation warnings (a dependency calls Buffer()) would break them.
process.noDeprecation = true;
if (process.argv.includes('--print-config')) {
  // Asked by the systemd unit (its socket and mount point): the settings alone, without loading the daemon.
  const { printedConfig } = await import('./config.js');
  try {
    process.stdout.write(`${await printedConfig(process.argv.slice(2))}\n`);
  } catch (err) {
    process.stderr.write(`nasd: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
} else await import('./nasd.js');
