// What the last-change lookup (src/store/last-change.ts) costs: a Home of GIT_DIR (made by the caller, e.g. with
// bench/deep-repo.mjs), every path's time as of main: cold (main's table made in one pass over the history),
// warm, after a restart (the table read back from the Store's directory), and again after one new commit.
// usage: node bench/last-change.mjs <bare-repo>
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { Store } from '../dist/src/store/store.js';

const dir = process.argv[2];
fs.rmSync(`${dir}/nas-last-change`, { force: true });
const store = await Store.open(dir);
const git = (...a) => execFileSync('git', [`--git-dir=${dir}`, ...a], { encoding: 'utf8' });
const paths = git('ls-tree', '-r', '-t', '--name-only', 'main').trim().split('\n');
const head = git('rev-parse', 'main').trim();

async function all(oid, from = store) {
  const t0 = process.hrtime.bigint();
  const out = await Promise.all(paths.map((p) => from.lastChange.timeOf(oid, p)));
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, out };
}
const cold = await all(head);
const warm = await all(head);
// A restart: a new Store reads the table the first one kept (saved beside the listing: wait for it).
for (let i = 0; i < 500 && !fs.existsSync(`${dir}/nas-last-change`); i++) await new Promise((r) => setTimeout(r, 20));
const restart = await all(head, await Store.open(dir));
if (restart.out.some((t, i) => t !== cold.out[i])) throw new Error('the table read back after a restart answers otherwise');
// Spot-check against git log for a sample of paths (about 50).
let wrong = 0;
const step = Math.max(1, Math.floor(paths.length / 50));
for (const p of paths.filter((_, i) => i % step === 0)) {
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
console.log(`after a restart (the kept table): ${restart.ms.toFixed(1)} ms`);
console.log(`after one new commit: ${after.ms.toFixed(1)} ms`);
console.log(`heap used ${heap.toFixed(0)} MiB, resident ${rss.toFixed(0)} MiB; wrong answers in a sample: ${wrong}`);
