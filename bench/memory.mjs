// The memory benchmark: token counts of a synthetic Home shaped like the nestwork article's, next to the
// article's figures, and the time to regenerate and to check a 1,000-topic index from the Store (git) and
// from a native directory. Run after `npm run build`: node bench/memory.mjs [--topics 1000] [--json FILE]
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Store, MODE } from '../dist/src/store/store.js';
import { treeFiles, mapFiles } from '../dist/src/memory/files.js';
import { loadMemory, regenerate } from '../dist/src/memory/model.js';
import { checkMemory } from '../dist/src/memory/check.js';
import { measure } from '../dist/src/memory/context.js';
import { DEFAULT_LIMITS } from '../dist/src/config/home-config.js';
import { countTokens } from '../dist/src/memory/tokens.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const TOPICS = Number(opt('--topics', 1000));

// Deterministic English-like prose: a fixed vocabulary and a seeded generator.
const WORDS = ('the a to of and in is for on with that this it as be are by from at or run build test deploy ' +
  'branch merge commit review note memory index topic agent session context token budget file path mount ' +
  'error retry cache config server client request response queue worker log metric alert release version ' +
  'schema migration database backup restore policy lease owner check failure timeout latency throughput ' +
  'when before after always never should must may because so then if only each every which what how').split(' ');
// Notes are technical: identifiers, paths, numbers and ids between the words.
const TECH = [
  () => `\`${WORDS[Math.floor(rand() * 40)]}_${WORDS[Math.floor(rand() * 40)]}=${Math.floor(rand() * 1000)}\``,
  () => `src/${WORDS[Math.floor(rand() * 40)]}/${WORDS[Math.floor(rand() * 40)]}.ts:${Math.floor(rand() * 400)}`,
  () => Math.floor(rand() * 2 ** 32).toString(16),
  () => `${(rand() * 100).toFixed(2)}%`,
];
let seed = 42;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
function prose(bytes) {
  let out = '';
  while (out.length < bytes) {
    const n = 8 + Math.floor(rand() * 12);
    const s = Array.from({ length: n }, () => (rand() < 0.25 ? TECH[Math.floor(rand() * TECH.length)]() : WORDS[Math.floor(rand() * WORDS.length)])).join(' ');
    out += s[0].toUpperCase() + s.slice(1) + (rand() < 0.15 ? '.\n\n' : '. ');
  }
  return out.slice(0, bytes);
}
const topic = (name, bytes, trust = 'reviewed') =>
  `---\ndescription: ${JSON.stringify(`When the task involves ${name.replace(/[-/]/g, ' ')}: ${prose(60).trim()}.`)}\nupdated: 2026-11-${String(1 + Math.floor(rand() * 28)).padStart(2, '0')}\ntrust: ${trust}\n---\n# ${name}\n\n${prose(bytes)}\n`;

/** 180 memory files, about 1.2 MB: the article's Home, in this project's layout. */
function articleHome() {
  const files = {
    'AGENTS.md': `# ops\n\n${prose(1500)}\n`,
    'memory/MEMORY.md': `# Memory\n\n${prose(950)}\n\nTopics: [topic index](topics/INDEX.md), read on demand.\n\n<!-- nas:index:start -->\n<!-- nas:index:end -->\n`,
    'memory/notes/README.md': '# Notes\n',
    'memory/topics/INDEX.md': '# Topic index\n\nRead the one topic your task needs.\n\n<!-- nas:index:start -->\n<!-- nas:index:end -->\n',
  };
  for (let i = 0; i < 35; i++) files[`memory/topics/topic-${i}.md`] = topic(`topic-${i}`, 5600 + Math.floor(rand() * 1400));
  for (let i = 0; i < 120; i++) files[`memory/journal/2026-${String(1 + (i % 11)).padStart(2, '0')}-${String(1 + i).padStart(3, '0')}.md`] = prose(7400);
  for (let i = 0; i < 21; i++) files[`memory/quarantine/import-${i}.md`] = topic(`import-${i}`, 6000, 'unreviewed');
  return files;
}

/** One index scope with n topics (a few nested one level), plus the start set. */
function indexHome(n) {
  const files = {
    'AGENTS.md': '# big\n\nRead memory/MEMORY.md.\n',
    'memory/MEMORY.md': '# Memory\n\n<!-- nas:index:start -->\n<!-- nas:index:end -->\n',
    'memory/big/INDEX.md': '# Big index\n\n<!-- nas:index:start -->\n<!-- nas:index:end -->\n',
  };
  for (let i = 0; i < n; i++) files[`memory/big/${i % 10 === 0 ? `group-${i}/` : ''}t-${i}.md`] = topic(`t-${i}`, 800 + Math.floor(rand() * 2000));
  return files;
}

async function storeOf(dir, files) {
  const store = await Store.init(`${dir}/home.git`);
  const entries = new Map();
  for (const [p, text] of Object.entries(files)) entries.set(p, { oid: await store.writeBlob(text), mode: MODE.file });
  return { store, tree: await store.editTree(null, entries) };
}

async function writeDir(dir, files) {
  for (const [p, text] of Object.entries(files)) {
    await fs.mkdir(path.dirname(`${dir}/${p}`), { recursive: true });
    await fs.writeFile(`${dir}/${p}`, text);
  }
}

/** A plain directory as a file set: the native baseline. */
function dirFiles(root) {
  return {
    async list() {
      const out = [];
      for (const e of await fs.readdir(root, { recursive: true, withFileTypes: true })) {
        if (!e.isFile()) continue;
        const p = path.relative(root, path.join(e.parentPath ?? e.path, e.name));
        out.push({ path: p, size: (await fs.stat(`${root}/${p}`)).size, id: p });
      }
      return out;
    },
    read: (f) => fs.readFile(`${root}/${f.path}`),
  };
}

const ms = async (fn) => {
  const t = process.hrtime.bigint();
  const r = await fn();
  return [Number(process.hrtime.bigint() - t) / 1e6, r];
};
const best = async (n, fn) => {
  let min = Infinity;
  for (let i = 0; i < n; i++) min = Math.min(min, (await ms(fn))[0]);
  return min;
};

const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-memory-bench-'));
try {
  countTokens('warm up the encoder');
  // 1. Tokens, next to the article's figures.
  const home = articleHome();
  let memory = await loadMemory(mapFiles(home));
  for (const { path: p, text } of regenerate(memory)) home[p] = text;
  memory = await loadMemory(mapFiles(home));
  const m = measure(memory, ['memory/topics/topic-7.md']);
  const whole = Object.values(home);
  const wholeTokens = whole.reduce((n, t) => n + countTokens(t), 0);
  const kb = (b) => `${(b / 1024).toFixed(1)} KB`;
  const rows = [
    ['full load (every file but journal and quarantine)', m.full, '37 files / 224 KB / ~69,600'],
    ['start set (resident only)', m.start, '2 files / 2.6 KB / ~640'],
    ['start + index + one topic', m.task, '4 files / 11.8 KB / ~3,600'],
    ['whole memory', { files: whole, bytes: whole.reduce((n, t) => n + Buffer.byteLength(t), 0), tokens: wholeTokens }, '180 files / 1.2 MB / ~369,000'],
  ];
  console.log('| set | files | bytes | tokens (o200k_base) | article |');
  console.log('|---|---|---|---|---|');
  for (const [name, r, article] of rows) console.log(`| ${name} | ${r.files.length} | ${kb(r.bytes)} | ${r.tokens.toLocaleString('en')} | ${article} |`);
  const check = checkMemory(memory, DEFAULT_LIMITS);
  console.log(`\nthe synthetic Home passes nas memory check: ${check.ok} (${check.errors} errors, ${check.warnings} warnings)\n`);

  // 2. Regenerate and check a 1,000-topic index.
  const big = indexHome(TOPICS);
  const { store, tree } = await storeOf(tmp, big);
  const native = `${tmp}/native`;
  await writeDir(native, big);
  const results = [];
  for (const [where, set] of [['Store (git), warm', () => treeFiles(store, tree)], ['native directory (same code, plain files)', () => dirFiles(native)]]) {
    const regen = await best(5, async () => regenerate(await loadMemory(set())));
    const chk = await best(5, async () => checkMemory(await loadMemory(set()), DEFAULT_LIMITS));
    results.push([where, regen, chk]);
  }
  const cold = await Store.open(`${tmp}/home.git`);
  const [coldRegen] = await ms(async () => regenerate(await loadMemory(treeFiles(cold, tree))));
  const [coldCheck] = await ms(async () => checkMemory(await loadMemory(treeFiles(await Store.open(`${tmp}/home.git`), tree)), DEFAULT_LIMITS));
  results.unshift(['Store (git), cold (new Store, nothing cached)', coldRegen, coldCheck]);
  const written = regenerate(await loadMemory(treeFiles(store, tree)));
  console.log(`| ${TOPICS} topics (${written.map((w) => `${w.path}: ${kb(Buffer.byteLength(w.text))}`).join(', ')}) | regenerate | check | target |`);
  console.log('|---|---|---|---|');
  const nativeRow = results.find((r) => r[0].startsWith('native'));
  for (const [where, regen, chk] of results) {
    const ratio = where.startsWith('native') ? '' : ` (${(nativeRow[1] / regen).toFixed(2)}x / ${(nativeRow[2] / chk).toFixed(2)}x native)`;
    console.log(`| ${where} | ${regen.toFixed(0)} ms | ${chk.toFixed(0)} ms${ratio} | < 1000 ms each: ${regen < 1000 && chk < 1000 ? 'met' : 'NOT met'} |`);
  }
  const json = opt('--json');
  if (json) await fs.writeFile(json, JSON.stringify({ tokens: rows.map(([n, r]) => ({ set: n, files: r.files.length, bytes: r.bytes, tokens: r.tokens })), index: results }, null, 2));
} finally {
  await fs.rm(tmp, { recursive: true, force: true });
}
