// What the last-change lookup (src/store/last-change.ts) costs: a Home of GIT_DIR (default: made by
// the caller), every path's time as of main, cold and warm, and again after one new commit.
// usage: node bench/last-change.mjs <bare-repo>
import { execFileSync } from 'node:child_process';
import { Store } from '../dist/src/store/store.js';

const dir = process.argv[2];
const store = await Store.open(dir);
const git = (...a) => execFileSync('git', [`--git-dir=${dir}`, ...a], { encoding: 'utf8' });
const paths = git('ls-tree', '-r', '-t', '--name-only', 'main').trim().split('\n');
const head = git('rev-parse', 'main').trim();

async function all(oid) {
  const t0 = process.hrtime.bigint();
  const out = await Promise.all(paths.map((p) => store.lastChange.timeOf(oid, p)));
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, out };
}
const cold = await all(head);
const warm = await all(head);
// Spot-check against git log for a sample of paths.
let wrong = 0;
for (const p of paths.filter((_, i) => i % 97 === 0)) {
  const want = Number(git('log', '-1', '--first-parent', '--format=%ct', 'main', '--', p).trim());
  if (want !== cold.out[paths.indexOf(p)]) wrong++;
}
// One new commit on top (an unrelated change): what a merge costs the next listing.
const tree = git('rev-parse', 'main^{tree}').trim();
const next = git('commit-tree', tree, '-p', head, '-m', 'empty').trim();
const after = await all(next);
const heap = process.memoryUsage().heapUsed / 2 ** 20;
const rss = process.memoryUsage().rss / 2 ** 20;
const commits = git('rev-list', '--count', 'main').trim();
console.log(`paths ${paths.length}, commits ${commits}`);
console.log(`cold (every path, first time): ${cold.ms.toFixed(0)} ms (${((cold.ms * 1000) / paths.length).toFixed(0)} us a path)`);
console.log(`warm (cached): ${warm.ms.toFixed(1)} ms (${((warm.ms * 1000) / paths.length).toFixed(1)} us a path)`);
console.log(`after one new commit: ${after.ms.toFixed(1)} ms`);
console.log(`heap used ${heap.toFixed(0)} MiB, resident ${rss.toFixed(0)} MiB; wrong answers in a sample: ${wrong}`);
