import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { TestDaemon, codeOf, run, type RunResult } from '../helpers.js';

/**
 * What other users are shown, and what nasd leaves on disk (security issue 30, items 7 (part), 8 and 9, and a
 * review finding): the recycle area, leases and runs only as the caller may read them; a run's environment; the
 * PR file route and the metadata records; the trash restore's who before any work; nasd's umask; a discarded
 * branch's open descriptors. Real mounts, real users (a member of the socket's group by uid), real runs.
 */

const AGENT = 4343;
const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

describe('read rules for other users, nasd umask, discard', () => {
  let d: TestDaemon;
  /** A directory every user may write: what a run's command writes for the test to read. */
  let shared: string;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const ok = (r: RunResult) => expect(r.code, r.stderr).toBe(0);
  const branch = async (name: string) => ok(await d.nas('branch', 'create', `demo/${name}`));
  const lease = async (spec: string, principal: string) => {
    const r = await d.nas('lease', 'issue', spec, '--principal', principal);
    ok(r);
    return r.stdout.trim();
  };
  /** The CLI as the user AGENT, a member of the socket's group, without the owner's token (with a lease if given). */
  const asAgent = (token: string, ...args: string[]): Promise<RunResult> =>
    run('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', process.execPath, CLI, '--socket', d.socket, ...args], {
      env: { NAS_OWNER_TOKEN_FILE: '/nonexistent/owner.token', NAS_OWNER_TOKEN: '', NAS_LEASE: token },
    });
  const agentJson = async <T>(token: string, ...args: string[]): Promise<T> => {
    const r = await asAgent(token, '--json', ...args);
    ok(r);
    return JSON.parse(r.stdout) as T;
  };
  type TrashRow = { path: string; branch: string; id: string; pending?: boolean };
  const paths = (rows: TrashRow[]) => rows.map((r) => `${r.branch}:${r.path}`);
  const head = async (ref: string) => (await d.git('rev-parse', ref)).stdout.trim();

  beforeAll(async () => {
    // A long commit window: a deletion stays pending until nas sync (what a restore must not commit for a refused caller).
    d = await TestDaemon.start({ windowMs: 60_000, extraArgs: ['--demo', '--socket-group', String(AGENT)] });
    await fs.chmod(d.dir, 0o755);
    shared = `${d.dir}/shared`;
    await fs.mkdir(shared);
    await fs.chmod(shared, 0o1777);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('lists to another user only the deletions it could have read where they were deleted; the owner sees all', async () => {
    await branch('vault');
    await fs.writeFile(p('vault', 'outbox/private.md'), 'root only\n');
    await fs.chmod(p('vault', 'outbox/private.md'), 0o600);
    await fs.writeFile(p('vault', 'outbox/public.md'), 'anyone\n');
    await fs.mkdir(p('vault', 'outbox/closed'), { mode: 0o700 });
    await fs.writeFile(p('vault', 'outbox/closed/inside.md'), 'behind a closed folder\n');
    await fs.chmod(p('vault', 'outbox/closed/inside.md'), 0o644);
    await d.sync('demo/vault');
    await fs.unlink(p('vault', 'outbox/private.md'));
    await fs.unlink(p('vault', 'outbox/public.md'));
    await fs.rm(p('vault', 'outbox/closed'), { recursive: true });
    await d.sync('demo/vault');

    const owner = paths(await d.nasJson<TrashRow[]>('trash', 'list', 'demo'));
    expect(owner).toEqual(expect.arrayContaining(['vault:outbox/private.md', 'vault:outbox/public.md', 'vault:outbox/closed', 'vault:outbox/closed/inside.md']));
    // A member of the socket's group without a lease: what every user may read, no more.
    const anyone = paths(await agentJson<TrashRow[]>('', 'trash', 'list', 'demo'));
    expect(anyone).toContain('vault:outbox/public.md');
    expect(anyone).not.toContain('vault:outbox/private.md');
    expect(anyone).not.toContain('vault:outbox/closed');
    expect(anyone).not.toContain('vault:outbox/closed/inside.md');
    const text = await asAgent('', 'trash', 'list', 'demo');
    ok(text);
    expect(text.stdout).not.toMatch(/private\.md|closed/);

    // A lease holder reads as its principal: its own 0600 file, deleted in its branch, shows; root's does not.
    await branch('desk');
    const token = await lease('demo/desk', String(AGENT));
    const mine = p('desk', 'outbox/mine.md');
    ok(await run('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', 'sh', '-c', `umask 077; echo mine > '${mine}'`]));
    await d.sync('demo/desk');
    ok(await run('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', 'rm', mine]));
    await d.sync('demo/desk');
    const holder = paths(await agentJson<TrashRow[]>(token, 'trash', 'list', 'demo'));
    expect(holder).toContain('desk:outbox/mine.md');
    expect(holder).not.toContain('vault:outbox/private.md');
    expect(paths(await agentJson<TrashRow[]>('', 'trash', 'list', 'demo'))).not.toContain('desk:outbox/mine.md');

    // What the list does not show the lease holder, it cannot restore into its branch either (by id, elsewhere).
    const secret = (await d.nasJson<TrashRow[]>('trash', 'list', 'demo')).find((r) => r.path === 'outbox/private.md')!;
    const refused = await asAgent(token, 'trash', 'restore', 'demo', '--id', secret.id, '--branch', 'desk', '--to', 'outbox/got-it.md');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/could not read outbox\/private\.md through demo@vault/);
    expect(await codeOf(fs.stat(p('desk', 'outbox/got-it.md')))).toBe('ENOENT');
    // What it may read it restores.
    ok(await asAgent(token, 'trash', 'restore', 'demo', 'outbox/mine.md', '--branch', 'desk'));
    expect(await fs.readFile(mine, 'utf8')).toBe('mine\n');
  });

  it('a restore refused to its caller commits nothing: who may is decided from the request and the record first', async () => {
    await branch('pend');
    await fs.writeFile(p('pend', 'outbox/left.md'), 'pending delete\n');
    await d.sync('demo/pend');
    await fs.unlink(p('pend', 'outbox/left.md'));
    const before = await head('refs/heads/pend');
    // Pending: the deletion's commit has not landed (60 s window).
    expect(await d.nasJson<TrashRow[]>('trash', 'list', 'demo')).toContainEqual(expect.objectContaining({ path: 'outbox/left.md', branch: 'pend', pending: true }));
    const refused = await asAgent('', 'trash', 'restore', 'demo', 'outbox/left.md');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/restoring from the recycle area in demo\/pend needs a lease/);
    // Nothing was committed for the refused caller: the branch's head is where it was, the deletion still pending.
    expect(await head('refs/heads/pend')).toBe(before);
    expect(await d.nasJson<TrashRow[]>('trash', 'list', 'demo')).toContainEqual(expect.objectContaining({ path: 'outbox/left.md', pending: true }));
    // The owner restores it (filing it first).
    ok(await d.nas('trash', 'restore', 'demo', 'outbox/left.md'));
    expect(await fs.readFile(p('pend', 'outbox/left.md'), 'utf8')).toBe('pending delete\n');
  });

  it('shows leases and runs to their own holder only; a run sees its own, without OLDPWD and with PWD its directory', async () => {
    await branch('other');
    await lease('demo/other', 'nobody');
    await branch('own');
    const token = await lease('demo/own', String(AGENT));
    const ownerEnv = { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' };
    ok(await run(process.execPath, [CLI, '--socket', d.socket, 'run', 'demo', '--user', 'nobody', '--no-propose', '--', 'true'], { env: ownerEnv }));
    // Called from a directory of root's: the run must not learn it.
    const callerDir = `${d.dir}/callers-own-dir`;
    await fs.mkdir(callerDir);
    const inside = `${process.execPath} ${CLI}`;
    const second = await run(process.execPath, [CLI, '--socket', d.socket, 'run', 'demo', '--user', 'nobody', '--no-propose', '--cwd', 'outbox', '--', 'sh', '-c',
      `env > ${shared}/env; ${inside} --json run list demo > ${shared}/runs.json; ${inside} --json lease list demo > ${shared}/leases.json`,
    ], { env: ownerEnv, cwd: callerDir });
    ok(second);

    const env = new Map((await fs.readFile(`${shared}/env`, 'utf8')).split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    expect(env.has('OLDPWD')).toBe(false);
    expect(env.get('PWD')).toBe(`${d.mnt}/demo/outbox`);
    const runId = env.get('NAS_RUN')!;
    const seenByRun = JSON.parse(await fs.readFile(`${shared}/runs.json`, 'utf8')) as { id: string }[];
    expect(seenByRun.map((r) => r.id)).toEqual([runId]);
    const leasesSeenByRun = JSON.parse(await fs.readFile(`${shared}/leases.json`, 'utf8')) as { branch: string; principal: string }[];
    expect(leasesSeenByRun.length).toBeGreaterThan(0);
    for (const l of leasesSeenByRun) expect([l.branch, l.principal]).toEqual([`run-${runId}`, 'nobody']);

    // The owner sees every lease and run.
    const all = await d.nasJson<{ branch: string }[]>('lease', 'list', 'demo');
    expect(all.map((l) => l.branch)).toEqual(expect.arrayContaining(['other', 'own', `run-${runId}`]));
    expect((await d.nasJson<unknown[]>('run', 'list', 'demo')).length).toBe(2);
    // Without a lease: none. With one: its own.
    expect(await agentJson<unknown[]>('', 'lease', 'list', 'demo')).toEqual([]);
    expect(await agentJson<unknown[]>('', 'run', 'list', 'demo')).toEqual([]);
    const text = await asAgent('', 'lease', 'list', 'demo');
    ok(text);
    expect(text.stdout).not.toMatch(/nobody|other/);
    const own = await agentJson<{ branch: string; principal: string }[]>(token, 'lease', 'list', 'demo');
    expect(own.map((l) => [l.branch, l.principal])).toEqual([['own', String(AGENT)]]);
    expect(await agentJson<unknown[]>(token, 'run', 'list', 'demo')).toEqual([]);
  });

  it("refuses a PR's .nas-meta/ records on the PR file route, and serves its files", async () => {
    await branch('prb');
    await fs.writeFile(p('prb', 'outbox/secret.md'), 'kept\n');
    await fs.chmod(p('prb', 'outbox/secret.md'), 0o600);
    await d.sync('demo/prb');
    const pr = await d.nasJson<{ id: number }>('propose', 'demo/prb', '--into', 'main', '--intent', 'a file with a record');
    const token = (await fs.readFile(`${d.state}/owner.token`, 'utf8')).trim();
    const get = (rel: string) => request(d.socket, `/v1/homes/demo/prs/${pr.id}/file/branch/${encodeURIComponent(rel)}`, token);
    const file = await get('outbox/secret.md');
    expect(file.status).toBe(200);
    expect(Buffer.from(JSON.parse(file.body).result.content, 'base64').toString()).toBe('kept\n');
    const record = await get('.nas-meta/outbox/secret.md');
    expect(record.status).toBe(404);
    expect(JSON.parse(record.body).error).toMatch(/\.nas-meta\/outbox\/secret\.md is a metadata record/);
    expect(record.body).not.toMatch(/mode=100600/);
  });

  it('a descriptor held open in a discarded branch gets EIO on write and fsync: nothing is taken and dropped', async () => {
    await branch('gone');
    const fh = await fs.open(p('gone', 'outbox/open.md'), 'w');
    try {
      await fh.write('before\n');
      await d.sync('demo/gone');
      ok(await d.nas('branch', 'discard', 'demo/gone'));
      expect(await codeOf(fh.write('after\n'))).toBe('EIO');
      expect(await codeOf(fh.sync())).toBe('EIO');
    } finally {
      await fh.close().catch(() => undefined);
    }
    // What it wrote before the discard is in the recycle area; nothing after.
    const rows = await d.nasJson<(TrashRow & { size: number })[]>('trash', 'list', 'demo');
    expect(rows).toContainEqual(expect.objectContaining({ path: 'outbox/open.md', branch: 'gone', size: 7 }));
  });

  it('nasd runs with umask 077: nothing it keeps is writable by others or readable by everyone; files made through the mount keep their modes', async () => {
    await branch('modes');
    // Files and folders made through the mount, each with its caller's umask.
    const as = (umask: string, cmd: string) => run('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', 'sh', '-c', `umask ${umask}; ${cmd}`]);
    const token = await lease('demo/modes', String(AGENT));
    expect(token).not.toBe('');
    ok(await as('000', `echo open > '${p('modes', 'outbox/open.md')}' && mkdir '${p('modes', 'outbox/open-dir')}'`));
    ok(await as('027', `echo group > '${p('modes', 'outbox/group.md')}' && mkdir '${p('modes', 'outbox/group-dir')}'`));
    await fs.appendFile(p('modes', 'AGENTS.md'), '\nmore\n'); // a copy-up of a template file
    await fs.mkdir(p('modes', 'memory/new-topic')); // in a folder that is only in git
    const mode = async (rel: string) => ((await fs.stat(p('modes', rel))).mode & 0o7777).toString(8);
    expect(await mode('outbox/open.md')).toBe('666');
    expect(await mode('outbox/open-dir')).toBe('777');
    expect(await mode('outbox/group.md')).toBe('640');
    expect(await mode('outbox/group-dir')).toBe('750');
    expect(await mode('AGENTS.md')).toBe('644');
    expect(await mode('memory')).toBe('755');
    expect(await mode('')).toBe('755');
    await d.sync('demo/modes');

    // An import: a Store nasd makes from a bundle.
    const bundle = `${d.dir}/demo.bundle`;
    ok(await d.nas('export', 'demo', bundle));
    ok(await d.nas('import', bundle, '--as', 'copy'));
    expect(await fs.readFile(d.path('copy', 'AGENTS.md'), 'utf8')).toBe(await fs.readFile(d.path('demo', 'AGENTS.md'), 'utf8'));

    // Nothing under the state directory is writable by group or others; nothing readable by everyone but the
    // branches' upper directories (the files as the mount shows them, with their owners' modes).
    const writable = await run('find', [d.state, '-perm', '/022', '-not', '-path', '*/upper/outbox/open*']);
    ok(writable);
    expect(writable.stdout).toBe('');
    const readable = await run('find', [d.state, '-perm', '/004', '-not', '-path', '*/upper/*', '-not', '-name', 'upper']);
    ok(readable);
    expect(readable.stdout).toBe('');
    // The control socket is its group's; its directory everyone passes through.
    expect(((await fs.stat(d.socket)).mode & 0o777).toString(8)).toBe('660');
  });
});

/** One GET on nasd's control socket with the owner's credential. */
function request(socket: string, url: string, ownerToken: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socket, path: url, method: 'GET', headers: { 'x-nas-owner': ownerToken } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
