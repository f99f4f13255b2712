// A deep repository to adopt as a Home: `--commits` commits on main over about `--files` files in folders of 100,
// written by `git fast-import` in seconds. Each commit changes one to three files; every 50th adds or deletes one
// (a deleted name comes back later), every 25th is a merge of a side commit (what a Home's merges look like).
// usage: node bench/deep-repo.mjs <new-bare-repo> [--commits 50000] [--files 5000]
import { spawn, execFileSync } from 'node:child_process';

const args = process.argv.slice(2);
const dir = args[0];
const opt = (name, dflt) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : dflt);
const commits = opt('--commits', 50_000);
const files = opt('--files', 5_000);
if (!dir) throw new Error('usage: node bench/deep-repo.mjs <new-bare-repo> [--commits N] [--files N]');

execFileSync('git', ['init', '-q', '--bare', dir]);
const git = spawn('git', [`--git-dir=${dir}`, 'fast-import', '--quiet', '--done'], { stdio: ['pipe', 'inherit', 'inherit'] });
let seed = 42;
const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
const pathOf = (i) => `d${Math.floor(i / 100)}/sub${i % 3}/f${i}.txt`;
const live = new Set();
let main = 1; // the mark of main's head
const chunks = [];
const out = (s) => chunks.push(s);
const flush = async () => {
  if (!git.stdin.write(chunks.join(''))) await new Promise((r) => git.stdin.once('drain', r));
  chunks.length = 0;
};
const data = (s) => `data ${Buffer.byteLength(s)}\n${s}\n`;
const modify = (i, n) => `M 100644 inline ${pathOf(i)}\n${data(`file ${i} version ${n}\n`)}`;
const header = (ref, n, msg) => `commit ${ref}\nmark :${n * 2 + (ref.endsWith('side') ? 1 : 0) + 1}\ncommitter Bench <bench@x> ${1_600_000_000 + n * 60} +0000\n${data(msg)}`;

out(header('refs/heads/main', 0, 'initial'));
for (let i = 0; i < files; i++) (live.add(i), out(modify(i, 0)));
for (let n = 1; n < commits; n++) {
  if (n % 25 === 0) {
    // A side commit, merged: the merge brings its change into main's first-parent line.
    const i = [...live][rand(live.size)];
    out(`${header('refs/heads/side', n, 'side')}from :${main}\n${modify(i, n)}`);
    out(`${header('refs/heads/main', n, 'merge side')}from :${main}\nmerge :${n * 2 + 2}\n${modify(i, n)}`);
  } else {
    out(header('refs/heads/main', n, `change ${n}`));
    for (let k = 1 + rand(3); k > 0; k--) {
      const i = rand(files);
      if (live.has(i) || n % 50 !== 0) (live.add(i), out(modify(i, n)));
    }
    if (n % 50 === 0) {
      const i = [...live][rand(live.size)];
      live.delete(i);
      out(`D ${pathOf(i)}\n`);
    }
  }
  main = n * 2 + 1;
  if (chunks.length > 1000) await flush();
}
out('done\n');
await flush();
git.stdin.end();
const code = await new Promise((r) => git.on('close', r));
if (code !== 0) throw new Error(`git fast-import: exit ${code}`);
execFileSync('git', [`--git-dir=${dir}`, 'update-ref', '-d', 'refs/heads/side']);
execFileSync('git', [`--git-dir=${dir}`, 'symbolic-ref', 'HEAD', 'refs/heads/main']);
console.log(`${dir}: ${commits} commits, ${live.size} files`);
