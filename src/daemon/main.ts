#!/usr/bin/env node
// Entry point of nasd. libuv's thread pool carries every git and disk call a FUSE request makes; its size is
// read when the pool starts, so it is set here, before anything else is loaded.
process.env.UV_THREADPOOL_SIZE ??= '16';
await import('./nasd.js');
