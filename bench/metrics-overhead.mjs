// What recording one FUSE request costs nasd's JavaScript thread, metrics on and off (after `npm run build`):
// start() + fuse() per request, and fuseError() per error, against the ~25 us a request's hop costs; and a scrape.
// node bench/metrics-overhead.mjs
import { Meter } from '../dist/src/metrics/meter.js';

const OPS = ['getattr', 'readdir', 'open', 'read', 'write', 'release', 'create', 'unlink'];
const N = 2_000_000;

function perCall(m, withError) {
  for (let i = 0; i < 100_000; i++) m.fuse(OPS[i & 7], m.start()); // warm up
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const op = OPS[i & 7];
    const started = m.start();
    if (withError) m.fuseError(op, 'ENOENT');
    m.fuse(op, started);
  }
  return Number(process.hrtime.bigint() - t) / N;
}

const off = new Meter();
const on = new Meter();
on.enable();
const rows = [
  ['off: start + fuse', perCall(off, false)],
  ['on: start + fuse', perCall(on, false)],
  ['on: start + fuseError + fuse', perCall(on, true)],
];
console.log('| per FUSE request | ns | of a 25 us hop |\n|---|---|---|');
for (const [what, ns] of rows) console.log(`| ${what} | ${ns.toFixed(0)} | ${((ns / 25_000) * 100).toFixed(2)}% |`);
const t = process.hrtime.bigint();
for (let i = 0; i < 20; i++) await on.expose();
console.log(`\none scrape (exposition of ${((await on.expose()).length / 1024).toFixed(0)} KiB): ${(Number(process.hrtime.bigint() - t) / 20 / 1e6).toFixed(2)} ms`);
