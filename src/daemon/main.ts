#!/usr/bin/env node
// Entry point of nasd. libuv's thread pool carries every git and disk call a FUSE request makes; its size is
// read when the pool starts, so it is set here, before anything else is loaded.
process.env.UV_THREADPOOL_SIZE ??= '16';
// The log is JSON lines: Node's deprecation warnings (a dependency calls Buffer()) would break them.
process.noDeprecation = true;
await import('./nasd.js');
