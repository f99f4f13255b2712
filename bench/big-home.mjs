// A Home with a long day behind it, made in seconds: what nasd would have written over thousands of requests
// (files on main with their metadata records, recycle entries, branches and their records, PRs and their heads,
// leases, runs), written straight into the Home's Store with one `git fast-import` stream. nasd must not be
// running on the Store while it grows (it keeps refs it has read); start it again afterwards.
//
//   import { growHome } from './big-home.mjs';
//   await growHome(`${state}/homes/demo.git`, { files: 10000, trash: 5000, branches: 200, prs: 1000, leases: 300, runs: 300 });
import { spawn, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';

export const BIG_HOME = { files: 10_000, trash: 5_000, branches: 200, prs: 1_000, leases: 300, runs: 300 };

const IDENT = 'Agent NAS <nas@localhost>';
/** The oid git gives the recycled files' content ('deleted\n'). */
const DELETED_OID = createHash('sha1').update('blob 8\0deleted\n').digest('hex');

/** One fast-import command stream, written as it is built. */
class Stream {
  constructor(gitDir) {
    this.child = spawn('git', [`--git-dir=${gitDir}`, 'fast-import', '--quiet', '--force'], { stdio: ['pipe', 'ignore', 'pipe'] });
    this.err = '';
    this.child.stderr.on('data', (d) => (this.err += d));
    this.mark = 0;
  }
  write(text) {
    return this.child.stdin.write(text) ? Promise.resolve() : new Promise((r) => this.child.stdin.once('drain', r));
  }
  /** A blob, by mark. */
  async blob(content) {
    const data = Buffer.from(content);
    const mark = ++this.mark;
    await this.write(`blob\nmark :${mark}\ndata ${data.length}\n`);
    await this.write(data);
    await this.write('\n');
    return `:${mark}`;
  }
  /** A commit on `ref` after `parent` (an oid, or none) that sets each [path, mode, blob mark]. */
  async commit(ref, parent, message, files) {
    const when = Math.floor(Date.now() / 1000);
    await this.write(`commit ${ref}\ncommitter ${IDENT} ${when} +0000\ndata ${Buffer.byteLength(message)}\n${message}\n`);
    if (parent) await this.write(`from ${parent}\n`);
    for (const [path, mode, blob] of files) await this.write(`M ${mode} ${blob} ${path}\n`);
    await this.write('\n');
  }
  async reset(ref, oid) {
    await this.write(`reset ${ref}\nfrom ${oid}\n\n`);
  }
  end() {
    this.child.stdin.end();
    return new Promise((resolve, reject) => this.child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`git fast-import: ${this.err}`)))));
  }
}

const yamlOf = (o) => Object.entries(o).map(([k, v]) => `${k}: ${typeof v === 'string' ? `'${v}'` : Array.isArray(v) ? `\n${v.map((x) => `  - '${x}'`).join('\n')}` : v}`).join('\n') + '\n';
const iso = (ms) => new Date(ms).toISOString();
const hex = (s, n) => createHash('sha256').update(String(s)).digest('hex').slice(0, n);

/** Grow the Home whose Store is `gitDir` by what `sizes` says (see BIG_HOME); returns what it added. */
export async function growHome(gitDir, sizes = BIG_HOME) {
  const git = (...a) => execFileSync('git', [`--git-dir=${gitDir}`, ...a]).toString().trim();
  const main = git('rev-parse', 'refs/heads/main');
  const refOr = (ref) => { try { return git('rev-parse', '--verify', '-q', ref); } catch { return null; } };
  const s = new Stream(gitDir);
  const now = Date.now();
  const day = iso(now).slice(0, 10);
  const meta = await s.blob(`mode=100644 uid=0 gid=0 atime=${Math.floor(now / 1000)}.000000000 mtime=${Math.floor(now / 1000)}.000000000\n`);

  // Files on main, each with its metadata record, in one merge-like commit on top of main.
  const files = [];
  for (let i = 0; i < sizes.files; i++) {
    const path = `data/d${Math.floor(i / 100)}/f${i}.md`;
    files.push([path, '100644', await s.blob(`file ${i}\n`)], [`.nas-meta/${path}`, '100644', meta]);
  }
  // Room for the branches it is given and a few more (a day of use raises the Home's limit the same way).
  const limits = git('show', `${main}:.nas/limits.yaml`).replace(/^max_branches: \d+$/m, `max_branches: ${sizes.branches + 100}`);
  files.push(['.nas/limits.yaml', '100644', await s.blob(`${limits}\n`)]);
  await s.commit('refs/heads/main', main, `grow: ${sizes.files} files\n`, files);

  // Branches: a ref each (at main as it was) and a record each, in one commit on refs/nas/branches.
  const records = [];
  for (let i = 0; i < sizes.branches; i++) {
    const name = `big-${i}`;
    await s.reset(`refs/heads/${name}`, main);
    records.push([`${name}.yaml`, '100644', await s.blob(`# Branch record, written by nas branch create.\n${yamlOf({ name, from: 'main', base: main, created: iso(now), ttl: '48h', expires: iso(now + 48 * 3600_000) })}`)]);
  }
  await s.commit('refs/nas/branches', refOr('refs/nas/branches'), 'grow: branches\n', records);

  // Recycle entries: a record and a content each.
  const trash = [];
  const content = await s.blob('deleted\n');
  for (let i = 0; i < sizes.trash; i++) {
    const id = `${now.toString(36)}-t${i}`;
    const rec = { id, path: `outbox/gone-${i}.md`, branch: `big-${i % Math.max(1, sizes.branches)}`, kind: 'file', size: 8, deletedAt: iso(now - i), oid: DELETED_OID };
    trash.push([`${day}/${id}/record.yaml`, '100644', await s.blob(yamlOf(rec))], [`${day}/${id}/content`, '100644', content]);
  }
  await s.commit('refs/nas/trash', refOr('refs/nas/trash'), 'grow: recycle entries\n', trash);

  // PRs (merged, each with its read manifest and its head ref), after those the Home has.
  const prs = [];
  const first = Number(git('ls-tree', '--name-only', refOr('refs/nas/prs') ?? main).split('\n').filter((n) => /^\d+$/.test(n)).sort((a, b) => b - a)[0] ?? 0) + 1;
  const reads = await s.blob('');
  for (let id = first; id < first + sizes.prs; id++) {
    const pr = `${yamlOf({ id, home: 'demo', branch: `run-big${id}`, target: 'main', state: 'merged', intent: `grown ${id}`, created: iso(now), updated: iso(now), head: main, base: main, target_head: main })}` +
      `provenance:\n  principal: nobody\n  reads: 0\n  reads_digest: 'sha256:${hex('', 64)}'\nchanges:\n  added: 1\n  modified: 0\n  deleted: 0\n  paths:\n    - A outbox/x${id}.md\n` +
      `checks: []\ntrust:\n  notes_changed: []\n  unreviewed: []\n  reviewed_claims: []\nreasons: []\nmerged:\n  commit: ${main}\n  at: '${iso(now)}'\n  by: policy\n`;
    prs.push([`${id}/pr.yaml`, '100644', await s.blob(pr)], [`${id}/reads.txt`, '100644', reads]);
    await s.reset(`refs/nas/pr-heads/${id}`, main);
  }
  await s.commit('refs/nas/prs', refOr('refs/nas/prs'), 'grow: PRs\n', prs);

  // Leases (revoked) and runs (ended), one record each.
  const leases = [];
  for (let i = 0; i < sizes.leases; i++) {
    const id = `l-${hex(`lease${i}`, 12)}`;
    leases.push([`${id}.yaml`, '100644', await s.blob(yamlOf({ id, home: 'demo', branch: `big-${i % Math.max(1, sizes.branches)}`, principal: 'nobody', scopes: ['write'], created: iso(now - i), expires: iso(now + 48 * 3600_000), token_sha256: hex(i, 64), revoked: iso(now) }))]);
  }
  await s.commit('refs/nas/leases', refOr('refs/nas/leases'), 'grow: leases\n', leases);
  const runs = [];
  for (let i = 0; i < sizes.runs; i++) {
    const id = `r${hex(`run${i}`, 8)}`;
    runs.push([`${id}.yaml`, '100644', await s.blob(yamlOf({ id, home: 'demo', branch: `run-${id}`, user: 'nobody', uid: 65534, command: ['true'], cwd: '', lease: `l-${hex(`lease${i}`, 12)}`, egress: false, started: iso(now - 60_000 - i), state: 'exited', ended: iso(now - 59_000), exit: 0 }))]);
  }
  await s.commit('refs/nas/runs', refOr('refs/nas/runs'), 'grow: runs\n', runs);
  await s.end();
  return { ...sizes };
}
