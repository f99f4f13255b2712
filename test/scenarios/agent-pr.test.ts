import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { createHash } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';

/** Agent PRs end to end: leases, propose, checks, policy, merge into the protected main, through the mount and the CLI. */

const AGENT = 4242;
const OTHER = 4243;
const rawPost = (socket: string, path: string, body: object, headers: Record<string, string>) =>
  new Promise<any>((resolve, reject) => {
    const req = http.request({ socketPath: socket, method: 'POST', path, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve(JSON.parse(text)));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
const asUser = (uid: number, script: string) => run('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'sh', '-c', script]);

describe('Agent PRs', () => {
  let d: TestDaemon;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const mainHead = async () => (await d.git('rev-parse', 'main')).stdout.trim();
  const branch = async (name: string) => expect((await d.nas('branch', 'create', `demo/${name}`)).code).toBe(0);
  /** A branch another test may have made already: each test must also pass on its own (-t). */
  const ensureBranch = async (name: string) => {
    const branches = await d.nasJson<any[]>('branch', 'list', 'demo');
    if (!branches.some((b) => b.name === name)) await branch(name);
  };
  const lease = async (spec: string, ...flags: string[]) => {
    const r = await d.nas('lease', 'issue', spec, ...flags);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  const propose = (token: string, spec: string, intent = 'a change', ...flags: string[]) =>
    d.nasWith({ NAS_LEASE: token, owner: false }, '--json', 'propose', spec, '--into', 'main', '--intent', intent, ...flags);
  const proposed = async (token: string, spec: string, intent?: string, ...flags: string[]) => {
    const r = await propose(token, spec, intent, ...flags);
    expect(r.stdout, r.stderr).not.toBe('');
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo', '--socket-group', String(AGENT)] });
    // The test's temporary directory is private to root; the principals need to reach the mount inside it.
    await fs.chmod(d.dir, 0o755);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it("issues a lease whose principal shares the owner's rights in the branch view, so other users cannot write there", async () => {
    await branch('draft');
    const token = await lease('demo/draft', '--principal', String(AGENT), '--ttl', '2h', '--scopes', 'write,propose:main');
    expect(token).toMatch(/^nas1\.l-[0-9a-f]{12}\.[A-Za-z0-9_-]{43}$/);
    const leases = await d.nasJson('lease', 'list', 'demo');
    expect(leases[0]).toMatchObject({ branch: 'draft', principal: String(AGENT), scopes: ['propose:main', 'write'], status: 'active' });
    expect(JSON.stringify(leases)).not.toContain(token.split('.')[2]);
    expect(JSON.stringify(leases)).not.toContain('token_sha256');

    // The template's folder stays the Home owner's; the principal is an entry of its ACL (one-owner.test.ts).
    const st = await fs.stat(p('draft', 'outbox'));
    expect([st.uid, st.gid, st.mode & 0o777]).toEqual([0, 0, 0o755]);
    expect((await run('getfacl', ['-cn', p('draft', 'outbox')])).stdout).toContain(`user:${AGENT}:rwx`);
    expect((await asUser(AGENT, `echo mine > ${p('draft', 'outbox/agent.md')}`)).code).toBe(0);
    const other = await asUser(OTHER, `echo theirs > ${p('draft', 'outbox/other.md')}`);
    expect(other.code).not.toBe(0);
    expect(other.stderr).toMatch(/Permission denied/);
    // Main stays read-only for everyone, the principal included.
    expect((await asUser(AGENT, `echo x > ${d.path('demo', 'outbox/x.md')}`)).stderr).toMatch(/Read-only file system|Permission denied/);
  });

  it("caps the branch's quota at the lease's byte budget while the lease is active", async () => {
    await branch('budget');
    const token = await lease('demo/budget', '--principal', 'alice', '--budget', '65536');
    await fs.writeFile(p('budget', 'outbox/fits.bin'), Buffer.alloc(40_000, 1));
    expect(await codeOf(fs.writeFile(p('budget', 'outbox/over.bin'), Buffer.alloc(40_000, 2)))).toBe('EDQUOT');
    expect((await d.nas('lease', 'revoke', 'demo', token.split('.')[1])).code).toBe(0);
    await fs.writeFile(p('budget', 'outbox/over.bin'), Buffer.alloc(40_000, 2));
  });

  it('merges a clean proposal by itself, with provenance and the read manifest in the merge commit', async () => {
    await ensureBranch('draft');
    const t = await lease('demo/draft', '--principal', String(AGENT), '--scopes', 'write,propose:main');
    const agentsText = await fs.readFile(p('draft', 'AGENTS.md'), 'utf8');
    await fs.writeFile(p('draft', 'outbox/release.md'), `# Release notes\n\nSee [agents](../AGENTS.md).\n`);
    const before = await mainHead();
    const pr = await proposed(t, 'demo/draft', 'add release notes', '--checks', 'links,schema,memory');
    expect(pr.state).toBe('merged');
    expect(pr.checks.map((c: any) => `${c.name}:${c.ok}`)).toEqual(['links:true', 'schema:true', 'memory:true', 'journal:true']);

    const log = (await d.git('log', '-1', '--format=%P%n%B', 'main')).stdout;
    expect(log.split('\n')[0].split(' ')[0]).toBe(before);
    const agentsOid = (await d.git('rev-parse', 'main:AGENTS.md')).stdout.trim();
    const digest = createHash('sha256').update(`${agentsOid} AGENTS.md\n`).digest('hex');
    expect(log).toContain('Nas-Intent: add release notes');
    expect(log).toContain(`Nas-Principal: ${AGENT}`);
    expect(log).toMatch(/Nas-Lease: l-[0-9a-f]{12}/);
    expect(log).toContain('Nas-Run: -');
    expect(log).toContain('Nas-Checks: links=pass, schema=pass, memory=pass, journal=pass');
    expect(log).toContain(`Nas-Reads-Digest: sha256:${digest}`);
    expect(agentsText).toContain('# demo');
    expect((await d.gitBlob('main:outbox/release.md')).toString()).toContain('Release notes');
    await eventually(async () => (await fs.readFile(d.path('demo', 'outbox/release.md'), 'utf8').catch(() => '')).includes('Release notes'), 'main view to show the merge');

    const show = await d.nasJson('pr', 'show', 'demo', String(pr.id));
    expect(show.reads).toBe(`${agentsOid} AGENTS.md\n`);
    expect(show.diff).toContain('+# Release notes');
    expect(show.provenance.principal).toBe(String(AGENT));
    const text = await d.nas('pr', 'show', 'demo', String(pr.id));
    expect(text.stdout).toMatch(/^reads: 1 path\(s\): AGENTS\.md; digest sha256:/m);
  });

  it('lets the run itself propose, as its own user, through the socket group', async () => {
    await branch('self');
    const t = await lease('demo/self', '--principal', String(AGENT));
    const cli = `${process.execPath} ${path.resolve('dist/src/cli/main.js')} --socket ${d.socket}`;
    const r = await asUser(AGENT, `echo own > ${p('self', 'outbox/own.md')} && NAS_LEASE=${t} ${cli} propose demo/self --into main --intent "from the run"`);
    expect(r.stdout + r.stderr).toMatch(/PR \d+ \(self -> main\): merged/);
    // Without its lease the same user gets a clear refusal, and no other user reaches the socket at all.
    expect((await asUser(AGENT, `${cli} lease issue demo/self --principal ${AGENT}`)).stderr).toMatch(/issuing a lease is an owner action/);
    expect((await asUser(OTHER, `${cli} status`)).stderr).toMatch(/no permission to use/);
  });

  it('refuses expired, revoked and foreign leases, and changes nothing', async () => {
    await ensureBranch('draft');
    await branch('leases');
    await fs.writeFile(p('leases', 'outbox/l.md'), 'l\n');
    const head = await mainHead();
    const prsBefore = (await d.nasJson('pr', 'list', 'demo')).length;
    const short = await lease('demo/leases', '--principal', 'alice', '--ttl', '1s');
    await new Promise((r) => setTimeout(r, 1500));
    expect((await propose(short, 'demo/leases')).stderr).toMatch(/lease l-[0-9a-f]{12} expired at/);

    const revoked = await lease('demo/leases', '--principal', 'alice');
    const id = revoked.split('.')[1];
    expect((await d.nas('lease', 'revoke', 'demo', id)).code).toBe(0);
    expect((await propose(revoked, 'demo/leases')).stderr).toMatch(new RegExp(`lease ${id} is revoked`));

    const forDraft = await lease('demo/draft', '--principal', 'alice');
    expect((await propose(forDraft, 'demo/leases')).stderr).toMatch(/is for the branch draft, not leases/);
    expect((await d.nas('home', 'create', 'other')).code).toBe(0);
    expect((await d.nas('branch', 'create', 'other/draft')).code).toBe(0);
    const foreign = await d.nasWith({ NAS_LEASE: forDraft, owner: false }, 'propose', 'other/draft', '--intent', 'x');
    expect(foreign.stderr).toMatch(/no lease matches this token \(id l-[0-9a-f]{12}\) in this Home/);
    const control = await d.nas('propose', 'demo/leases', '--intent', 'hide\u001b[2K this');
    expect(control.stderr).toMatch(/--intent must be plain text: no control characters/);
    const garbage = await d.nasWith({ NAS_LEASE: 'not-a-token', owner: false }, 'propose', 'demo/leases', '--intent', 'x');
    expect(garbage.stderr).toMatch(/not a lease token/);
    const none = await d.nasWith({ owner: false }, 'propose', 'demo/leases', '--intent', 'x');
    expect(none.stderr).toMatch(/needs a lease that grants propose:main on demo\/leases/);

    expect(await mainHead()).toBe(head);
    expect((await d.nasJson('pr', 'list', 'demo')).length).toBe(prsBefore);
  });

  it('lets a sub-lease only narrow its parent, and revoking the parent revokes it', async () => {
    await ensureBranch('draft');
    await ensureBranch('leases');
    const parent = await lease('demo/leases', '--principal', 'alice', '--ttl', '1h', '--scopes', 'write', '--budget', '1000000');
    const sub = (...flags: string[]) => d.nasWith({ NAS_LEASE: parent, owner: false }, 'lease', 'issue', 'demo/leases', ...flags);
    expect((await sub('--scopes', 'write,propose:main')).stderr).toMatch(/can only narrow its parent .*asks for propose:main/);
    expect((await sub('--ttl', '3h')).stderr).toMatch(/would outlive the parent/);
    expect((await sub('--budget', '2000000')).stderr).toMatch(/budget must be at most the parent's 1000000 bytes/);
    expect((await sub('--principal', 'mallory')).stderr).toMatch(/principal mallory is not the parent's/);
    const other = await d.nasWith({ NAS_LEASE: parent, owner: false }, 'lease', 'issue', 'demo/draft', '--scopes', 'write');
    expect(other.stderr).toMatch(/it is for demo\/draft, the parent for demo\/leases/);

    const raw = await rawPost(d.socket, '/v1/homes/demo/leases', { branch: 'leases', budget: 'lots' }, { 'x-nas-lease': parent });
    expect(raw).toMatchObject({ ok: false, error: expect.stringMatching(/--budget must be a whole number of bytes/) });
    const ok = await sub('--ttl', '10m', '--budget', '500000');
    expect(ok.code, ok.stderr).toBe(0);
    const child = ok.stdout.trim();
    const childId = child.split('.')[1];
    expect((await d.nasJson('lease', 'list', 'demo')).find((l: any) => l.id === childId)).toMatchObject({ parent: parent.split('.')[1], budget_bytes: 500000 });

    // A lease cannot revoke; the owner can, and the child goes with its parent.
    const byLease = await d.nasWith({ NAS_LEASE: parent, owner: false }, 'lease', 'revoke', 'demo', parent.split('.')[1]);
    expect(byLease.stderr).toMatch(/revoking a lease is an owner action: it needs the owner credential/);
    expect((await d.nas('lease', 'revoke', 'demo', parent.split('.')[1])).code).toBe(0);
    const discard = await d.nasWith({ NAS_LEASE: child, owner: false }, 'branch', 'discard', 'demo/leases');
    expect(discard.stderr).toMatch(new RegExp(`its parent ${parent.split('.')[1]} was revoked`));
  });

  it('keeps owner actions for the owner credential, which no lease carries', async () => {
    // What the owner could act on: a PR waiting for a decision (it deletes a file) and a note in quarantine.
    const note = '---\ndescription: When acting as the owner.\nupdated: 2026-11-30\ntrust: unreviewed\n---\nOwner only.\n';
    await d.pushToMain({ 'outbox/owned.md': 'owned\n', 'memory/quarantine/owned.md': note }, 'owner: things to decide on');
    await branch('owned');
    // The strongest lease there is, for the very branch of the PR: it still carries no owner right.
    const t = await lease('demo/owned', '--principal', 'alice', '--scopes', 'write,propose:main');
    await fs.unlink(p('owned', 'outbox/owned.md'));
    const waiting = await proposed(t, 'demo/owned', 'remove owned.md');
    expect(waiting).toMatchObject({ state: 'waiting', reasons: ['deletes outbox/owned.md'] });
    const other = await lease('demo/owned', '--principal', 'bob');
    const otherId = other.split('.')[1];
    const id = String(waiting.id);
    const head = await mainHead();
    const leaseCount = (await d.nasJson<any[]>('lease', 'list', 'demo')).length;

    const ownerOnly = [['pr', 'approve', 'demo', id], ['pr', 'reject', 'demo', id, '--why', 'no'], ['memory', 'review', 'demo', 'memory/quarantine/owned.md'],
      ['lease', 'revoke', 'demo', otherId]];
    for (const args of [...ownerOnly, ['lease', 'issue', 'demo/owned', '--principal', 'alice']]) {
      const r = await d.nasWith({ owner: false }, ...args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(/is an owner action: it needs the owner credential/);
    }
    // With the lease: the same refusal, naming the owner credential. (`lease issue` with a lease is a
    // sub-lease, which only narrows it: see the sub-lease test.)
    for (const args of ownerOnly) {
      const r = await d.nasWith({ NAS_LEASE: t, owner: false }, ...args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(/is an owner action: it needs the owner credential/);
    }
    // Nothing changed: the PR waits, the note is unreviewed, main and the leases are as they were.
    expect((await d.nasJson('pr', 'show', 'demo', id)).state).toBe('waiting');
    expect(await mainHead()).toBe(head);
    expect((await d.gitBlob('main:memory/quarantine/owned.md')).toString()).toBe(note);
    expect((await d.git('cat-file', '-e', 'main:memory/notes/owned.md')).code).not.toBe(0);
    const leases = await d.nasJson<any[]>('lease', 'list', 'demo');
    expect(leases.length).toBe(leaseCount);
    expect(leases.find((l) => l.id === otherId).status).toBe('active');

    // The owner can: decide the PR, review the note, revoke the lease.
    expect(await d.nasJson('pr', 'reject', 'demo', id, '--why', 'keep it')).toMatchObject({ state: 'rejected' });
    expect((await d.nasJson('memory', 'review', 'demo', 'memory/quarantine/owned.md')).to).toBe('memory/notes/owned.md');
    expect((await d.nasJson('lease', 'revoke', 'demo', otherId)).status).toBe('revoked');
  });

  it('refuses writes into a branch through the control socket without a write lease or the owner', async () => {
    await branch('guarded');
    const propOnly = await lease('demo/guarded', '--principal', 'alice', '--scopes', 'propose:main');
    await fs.writeFile(`${d.dir}/n.md`, '# n\n');
    for (const as of [{ owner: false }, { owner: false, NAS_LEASE: propOnly }]) {
      const imp = await d.nasWith(as, 'memory', 'import', 'demo@guarded', `${d.dir}/n.md`);
      expect(imp.stderr).toMatch(/importing notes in demo\/guarded (needs a lease that grants write|refused: lease .* does not grant write)/);
      expect((await d.nasWith(as, 'memory', 'index', 'demo@guarded')).stderr).toMatch(/regenerating indexes in demo\/guarded/);
      expect((await d.nasWith(as, 'trash', 'restore', 'demo', 'outbox/x.md', '--branch', 'guarded')).stderr).toMatch(/restoring from the recycle area in demo\/guarded/);
      expect((await d.nasWith(as, 'branch', 'create', 'demo/sneaky')).stderr).toMatch(/creating a branch is an owner action/);
      expect((await d.nasWith(as, 'home', 'create', 'sneaky')).stderr).toMatch(/creating a Home is an owner action/);
    }
    await expect(fs.access(p('guarded', 'memory/quarantine/n.md'))).rejects.toMatchObject({ code: 'ENOENT' });
    const write = await lease('demo/guarded', '--principal', 'alice', '--scopes', 'write');
    expect((await d.nasWith({ owner: false, NAS_LEASE: write }, 'memory', 'import', 'demo@guarded', `${d.dir}/n.md`)).code).toBe(0);
  });

  it("judges a PR by main's rules: a branch cannot loosen .nas/, and main's stricter policy applies to older branches", async () => {
    await branch('loosen');
    const t = await lease('demo/loosen', '--principal', 'alice');
    await expect(fs.writeFile(p('loosen', '.nas/policy.yaml'), 'version: 1\nmerge:\n  auto: true\n  required_checks: []\n')).rejects.toMatchObject({ code: 'EPERM' });
    const policy = await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8');
    await d.pushToMain({ '.nas/policy.yaml': `${policy}merge:\n  auto: false\n` }, 'owner: every PR waits');
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8')).includes('auto: false'), 'main to follow the push');
    await fs.writeFile(p('loosen', 'outbox/plain.md'), 'plain\n');
    const pr = await proposed(t, 'demo/loosen');
    expect(pr.state).toBe('waiting');
    expect(pr.reasons).toEqual(["main's .nas/policy.yaml sets merge.auto: false"]);
    await d.pushToMain({ '.nas/policy.yaml': policy }, 'owner: back to auto-merge');
    expect((await d.nas('pr', 'approve', 'demo', String(pr.id))).code).toBe(0);
  });

  it("fails a PR whose run marks its own note reviewed, and waits for one that read the inbox", async () => {
    await branch('notes');
    const t = await lease('demo/notes', '--principal', 'alice');
    await fs.writeFile(p('notes', 'memory/notes/self.md'), '---\ndescription: When self-promoting.\nupdated: 2026-11-30\ntrust: reviewed\n---\nTrust me.\n');
    const head = await mainHead();
    const pr = await proposed(t, 'demo/notes', 'promote my note');
    expect(pr.state).toBe('failed');
    expect(pr.checks.find((c: any) => c.name === 'memory').output).toMatch(/memory\/notes\/self.md:1: \[trust-claim\]/);
    expect(pr.trust.reviewed_claims).toEqual(['memory/notes/self.md']);
    expect(await mainHead()).toBe(head);
    expect((await propose(t, 'demo/notes')).code).toBe(1);

    await branch('inbox');
    const ti = await lease('demo/inbox', '--principal', String(AGENT));
    expect((await asUser(AGENT, `cat ${p('inbox', 'inbox/README.md')} > /dev/null`)).code).toBe(0);
    await fs.writeFile(p('inbox', 'outbox/summary.md'), 'summary\n');
    const waiting = await proposed(ti, 'demo/inbox', 'summarise the inbox');
    expect(waiting.state).toBe('waiting');
    expect(waiting.reasons).toEqual(['the run read untrusted input: inbox/README.md']);

    // Reading it another way is recorded too: moved (a copy-up) and read from the upper directory.
    await branch('inbox2');
    const t2 = await lease('demo/inbox2', '--principal', String(AGENT));
    const moved = await asUser(AGENT, `cd ${p('inbox2', 'inbox')} && mv README.md t.md && cat t.md > /dev/null && mv t.md README.md && echo s > ../outbox/s.md`);
    expect(moved.code, moved.stderr).toBe(0);
    expect((await proposed(t2, 'demo/inbox2', 'sneaky summary')).reasons).toEqual(['the run read untrusted input: inbox/README.md']);
    // Only the branch's principal reads its inbox; on main the inbox is the owner's.
    expect((await asUser(OTHER, `cat ${p('inbox2', 'inbox/README.md')}`)).stderr).toMatch(/Permission denied/);
    expect((await asUser(AGENT, `cat ${d.path('demo', 'inbox/README.md')}`)).stderr).toMatch(/Permission denied/);
  });

  it('waits for a note marked reviewed when main does not require the memory check, and for a misspelled required check', async () => {
    const policy = await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8');
    await d.pushToMain({ '.nas/policy.yaml': `${policy}merge:\n  required_checks: [links]\n` }, 'owner: links only');
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8')).includes('[links]'), 'main to follow the push');
    await branch('claim');
    const t = await lease('demo/claim', '--principal', 'alice');
    await fs.writeFile(p('claim', 'memory/notes/claim.md'), '---\ndescription: When claiming.\nupdated: 2026-11-30\ntrust: reviewed\n---\nClaim.\n');
    const pr = await proposed(t, 'demo/claim', 'claim a review');
    expect(pr.checks.map((c: any) => c.name)).toEqual(['links']);
    expect(pr).toMatchObject({ state: 'waiting', reasons: ['marks notes reviewed: memory/notes/claim.md'] });

    await d.pushToMain({ '.nas/policy.yaml': `${policy}merge:\n  required_checks: [link]\n` }, 'owner: a typo');
    await eventually(async () => (await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8')).includes('[link]'), 'main to follow the push');
    await branch('typo');
    const tt = await lease('demo/typo', '--principal', 'alice');
    await fs.writeFile(p('typo', 'outbox/typo.md'), 'typo\n');
    const typo = await proposed(tt, 'demo/typo', 'plain change');
    expect(typo.state).toBe('waiting');
    expect(typo.reasons[0]).toMatch(/merge.required_checks names unknown check\(s\) link/);
    await d.pushToMain({ '.nas/policy.yaml': policy }, 'owner: back to the defaults');
    await eventually(async () => !(await fs.readFile(d.path('demo', '.nas/policy.yaml'), 'utf8')).includes('merge:'), 'main to follow the push');
  });

  it('never loses one of two merges racing into main', async () => {
    const tokens: string[] = [];
    for (const name of ['race-1', 'race-2']) {
      await branch(name);
      tokens.push(await lease(`demo/${name}`, '--principal', 'alice'));
      await fs.writeFile(p(name, `outbox/${name}.md`), `${name}\n`);
    }
    const [a, b] = await Promise.all([proposed(tokens[0], 'demo/race-1'), proposed(tokens[1], 'demo/race-2')]);
    expect([a.state, b.state]).toEqual(['merged', 'merged']);
    expect((await d.gitBlob('main:outbox/race-1.md')).toString()).toBe('race-1\n');
    expect((await d.gitBlob('main:outbox/race-2.md')).toString()).toBe('race-2\n');
    const parents = (await d.git('log', '-2', '--format=%P', 'main')).stdout.trim().split('\n');
    expect(parents[0].split(' ')[0]).toBe(a.merged.commit === (await mainHead()) ? b.merged.commit : a.merged.commit);
  });

  it('stops at a conflict on the same line or a binary changed on both sides, leaving main and the branch intact', async () => {
    await d.pushToMain({ 'outbox/shared.md': 'one\ntwo\nthree\n', 'outbox/logo.bin': Buffer.from([0, 1, 2, 3]) }, 'owner: shared files');
    await branch('left');
    await branch('right');
    const tl = await lease('demo/left', '--principal', 'alice');
    const tr = await lease('demo/right', '--principal', 'alice');
    await fs.writeFile(p('left', 'outbox/shared.md'), 'one\nTWO from left\nthree\n');
    await fs.writeFile(p('left', 'outbox/logo.bin'), Buffer.from([0, 1, 2, 4]));
    expect((await proposed(tl, 'demo/left')).state).toBe('merged');
    await fs.writeFile(p('right', 'outbox/shared.md'), 'one\nTWO from right\nthree\n');
    await fs.writeFile(p('right', 'outbox/logo.bin'), Buffer.from([0, 1, 2, 5]));
    const head = await mainHead();
    const r = await propose(tr, 'demo/right');
    expect(r.code).toBe(1);
    const pr = JSON.parse(r.stdout);
    expect(pr.state).toBe('conflict');
    const byPath = Object.fromEntries(pr.conflicts.map((c: any) => [c.path, c]));
    expect(byPath['outbox/logo.bin'].kind).toBe('binary');
    expect(byPath['outbox/shared.md'].hunks).toEqual([{ line: 2, base: ['two'], main: ['TWO from left'], branch: ['TWO from right'] }]);
    expect(await mainHead()).toBe(head);
    expect((await d.gitBlob('main:outbox/shared.md')).toString()).toBe('one\nTWO from left\nthree\n');
    expect(await fs.readFile(p('right', 'outbox/shared.md'), 'utf8')).toBe('one\nTWO from right\nthree\n');
    const text = await d.nas('pr', 'show', 'demo', String(pr.id));
    expect(text.stdout).toMatch(/conflict text outbox\/shared.md\n\s+at line 2:\n\s+base\s+\| two\n\s+main\s+\| TWO from left\n\s+branch \| TWO from right/);
    expect((await d.nas('pr', 'approve', 'demo', String(pr.id))).stderr).toMatch(/is conflict: only a waiting PR can be approved/);
  });

  it('merges JSON and YAML key by key, stops where both changed one key, and sends other structured data to a person', async () => {
    await d.pushToMain({
      'outbox/settings.json': '{\n    "a": 1,\n    "b": { "x": 1, "y": 1 },\n    "list": [1]\n}\n',
      'outbox/notes.yaml': '# a comment git keeps\ntitle: notes\nowner: alice\n',
      'outbox/config.toml': '[server]\nport = 80\n\n[client]\nretries = 1\n',
    }, 'owner: structured files');
    const names = ['json-1', 'json-2', 'json-3', 'toml-1', 'toml-2'];
    const tokens: Record<string, string> = {};
    for (const name of names) {
      await branch(name);
      tokens[name] = await lease(`demo/${name}`, '--principal', 'alice');
    }
    const edit = async (name: string, rel: string, fn: (text: string) => string) =>
      fs.writeFile(p(name, rel), fn(await fs.readFile(p(name, rel), 'utf8')));
    // Different keys of one JSON file, and of one YAML file: both merge by policy, key by key.
    await edit('json-1', 'outbox/settings.json', (t) => t.replace('"a": 1', '"a": 2').replace('"x": 1', '"x": 2'));
    await edit('json-1', 'outbox/notes.yaml', (t) => t.replace('title: notes', 'title: field notes'));
    expect((await proposed(tokens['json-1'], 'demo/json-1')).state).toBe('merged');
    await edit('json-2', 'outbox/settings.json', (t) => t.replace('"y": 1', '"y": 3').replace('"list": [1]', '"list": [1],\n    "c": true'));
    await edit('json-2', 'outbox/notes.yaml', (t) => `${t}tags: [a, b]\n`);
    const two = await proposed(tokens['json-2'], 'demo/json-2');
    expect(two.state, JSON.stringify(two)).toBe('merged');
    const merged = (await d.gitBlob('main:outbox/settings.json')).toString();
    expect(JSON.parse(merged)).toEqual({ a: 2, b: { x: 2, y: 3 }, list: [1], c: true });
    expect(merged).toMatch(/^\{\n {4}"a": 2,/);
    expect(merged.endsWith('}\n')).toBe(true);
    // Where git's line merge is clean and holds the same data, its bytes stay (comments, flow style).
    expect((await d.gitBlob('main:outbox/notes.yaml')).toString()).toBe('# a comment git keeps\ntitle: field notes\nowner: alice\ntags: [a, b]\n');
    // The same key changed on both sides: a conflict naming the key; main does not move.
    await edit('json-3', 'outbox/settings.json', (t) => t.replace('"a": 1', '"a": 5'));
    const head = await mainHead();
    const three = await proposed(tokens['json-3'], 'demo/json-3');
    expect(three.state).toBe('conflict');
    expect(three.conflicts).toEqual([{ path: 'outbox/settings.json', kind: 'structured', keys: ['a'] }]);
    expect(await mainHead()).toBe(head);
    expect((await d.nas('pr', 'show', 'demo', String(three.id))).stdout).toMatch(/conflict structured outbox\/settings\.json: a\n/);
    // TOML has no driver: changed on both sides, the PR waits for a person, who can merge it (line by line).
    await edit('toml-1', 'outbox/config.toml', (t) => t.replace('port = 80', 'port = 8080'));
    expect((await proposed(tokens['toml-1'], 'demo/toml-1')).state).toBe('merged');
    await edit('toml-2', 'outbox/config.toml', (t) => t.replace('retries = 1', 'retries = 3'));
    const toml = await proposed(tokens['toml-2'], 'demo/toml-2');
    expect(toml.state).toBe('waiting');
    expect(toml.reasons).toContain('main changed outbox/config.toml too, and no merge driver in .nas/merge.yaml merges it: a person decides');
    expect((await d.nasJson('pr', 'approve', 'demo', String(toml.id))).state).toBe('merged');
    expect((await d.gitBlob('main:outbox/config.toml')).toString()).toBe('[server]\nport = 8080\n\n[client]\nretries = 3\n');
  });

  it('refuses an empty proposal and an unknown PR id clearly', async () => {
    await branch('empty');
    const t = await lease('demo/empty', '--principal', 'alice');
    const count = (await d.nasJson('pr', 'list', 'demo')).length;
    const r = await propose(t, 'demo/empty');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/nothing to propose: demo@empty has no changes against main/);
    expect((await d.nasJson('pr', 'list', 'demo')).length).toBe(count);
    expect((await d.nas('pr', 'show', 'demo', '999')).stderr).toMatch(/Home demo has no PR 999/);
    expect((await d.nas('pr', 'approve', 'demo', 'x')).stderr).toMatch(/a PR id is a whole number/);
    expect((await propose(t, 'demo/empty', 'x', '--checks', 'nope')).stderr).toMatch(/unknown check\(s\) nope; main defines: links, schema, memory, journal/);
  });

  it('holds deletions for the owner; approval merges and files them in the recycle area; rejection records why', async () => {
    // The files it deletes come from earlier tests; on its own, the owner puts them on main first.
    const missing: Record<string, string> = {};
    if ((await d.git('cat-file', '-e', 'main:outbox/release.md')).code !== 0) missing['outbox/release.md'] = '# Release notes\n\nSee [agents](../AGENTS.md).\n';
    if ((await d.git('cat-file', '-e', 'main:outbox/race-1.md')).code !== 0) missing['outbox/race-1.md'] = 'race-1\n';
    if (Object.keys(missing).length) await d.pushToMain(missing, 'owner: files to delete');
    const statsBefore = await d.nasJson('pr', 'stats', 'demo');
    await branch('cleanup');
    const t = await lease('demo/cleanup', '--principal', 'alice');
    await fs.unlink(p('cleanup', 'outbox/release.md'));
    const pr = await proposed(t, 'demo/cleanup', 'remove old notes');
    expect(pr.state).toBe('waiting');
    expect(pr.reasons).toEqual(['deletes outbox/release.md']);
    const approved = await d.nasJson('pr', 'approve', 'demo', String(pr.id));
    expect(approved.state).toBe('merged');
    expect(approved.merged.by).toBe('root');
    expect((await d.git('cat-file', '-e', 'main:outbox/release.md')).code).not.toBe(0);
    const trash = await d.nasJson('trash', 'list', 'demo');
    expect(trash.find((r: any) => r.path === 'outbox/release.md' && r.branch === 'main')).toBeTruthy();

    await branch('nope');
    const tn = await lease('demo/nope', '--principal', 'alice');
    await fs.unlink(p('nope', 'outbox/race-1.md'));
    const waiting = await proposed(tn, 'demo/nope', 'delete race-1');
    expect((await d.nas('pr', 'reject', 'demo', String(waiting.id))).stderr).toMatch(/say why/);
    const rejected = await d.nasJson('pr', 'reject', 'demo', String(waiting.id), '--why', 'keep it');
    expect(rejected).toMatchObject({ state: 'rejected', decision: { action: 'reject', why: 'keep it', by: 'root' } });
    expect((await d.gitBlob('main:outbox/race-1.md')).toString()).toBe('race-1\n');
    // Counted by what this test did, whatever ran before it.
    const stats = await d.nasJson('pr', 'stats', 'demo');
    const change = Object.fromEntries(['rejected', 'approved', 'conflict', 'failed', 'merged_by_policy'].map((k) => [k, stats[k] - statsBefore[k]]));
    expect(change).toEqual({ rejected: 1, approved: 1, conflict: 0, failed: 0, merged_by_policy: 0 });
  });

  it('runs custom checks from main\'s .nas/checks.yaml with a time limit, keeping their output', async () => {
    // The leaves.sh check records the pids of what it leaves behind (it runs as nobody, hence a world-writable dir):
    // the test then looks at and stops exactly those processes, not any `sleep` on the machine.
    const pids = `${d.dir}/check-pids`;
    await fs.mkdir(pids);
    await fs.chmod(pids, 0o777);
    await d.pushToMain({
      '.nas/checks.yaml': 'version: 1\nchecks:\n  - name: no-todo\n    run: .nas/checks/no-todo.sh\n    timeout: 10s\n  - name: slow\n    run: .nas/checks/slow.sh\n    timeout: 1s\n' +
        '  - name: leaves\n    run: .nas/checks/leaves.sh\n',
      '.nas/checks/no-todo.sh': '#!/bin/sh\nif grep -rn TODO .; then echo "found TODO"; exit 1; fi\necho clean\n',
      '.nas/checks/slow.sh': '#!/bin/sh\nsleep 30\n',
      '.nas/checks/leaves.sh': `#!/bin/sh\n(sleep 301 & echo $! > ${pids}/301)\nsetsid sleep 302 & echo $! > ${pids}/302\nid -u\n`,
    }, 'owner: custom checks');
    await eventually(async () => (await fs.readdir(d.path('demo', '.nas'))).includes('checks.yaml'), 'main to show the checks');
    await branch('todo');
    const t = await lease('demo/todo', '--principal', 'alice');
    await fs.writeFile(p('todo', 'outbox/plan.md'), 'TODO: finish\n');
    const pr = await proposed(t, 'demo/todo', 'a plan', '--checks', 'no-todo,slow');
    expect(pr.state).toBe('failed');
    const check = Object.fromEntries(pr.checks.map((c: any) => [c.name, c]));
    expect(check['no-todo']).toMatchObject({ ok: false });
    expect(check['no-todo'].output).toMatch(/outbox\/plan.md:1:TODO: finish\nfound TODO/);
    expect(check.slow.ok).toBe(false);
    expect(check.slow.output).toMatch(/killed after its time limit of 1000 ms/);
    // A check runs as nobody; all it started is killed when it ends, also a process that left its group (setsid).
    await fs.writeFile(p('todo', 'outbox/plan.md'), 'done\n');
    const cmdline = (pid: number) => fs.readFile(`/proc/${pid}/cmdline`, 'utf8').then((c) => c.split('\0').join(' ').trim(), () => '');
    const pidIn = async (name: string) => Number((await fs.readFile(`${pids}/${name}`, 'utf8').catch(() => '')).trim()) || null;
    try {
      const clean = await proposed(t, 'demo/todo', 'a plan', '--checks', 'leaves');
      expect(clean.checks.find((c: any) => c.name === 'leaves')).toMatchObject({ ok: true, output: '65534\n' });
      for (const name of ['301', '302']) {
        const pid = await pidIn(name);
        expect(pid).not.toBeNull();
        expect(await cmdline(pid!)).not.toBe(`sleep ${name}`);
      }
    } finally {
      // Stop it by its pid, and only if that pid is still the sleep the check started.
      const in302 = await pidIn('302');
      if (in302 && (await cmdline(in302)) === 'sleep 302') process.kill(in302, 'SIGKILL');
    }
  });

  it('discards the losing parallel attempt: its work goes to the recycle area, the branch goes', async () => {
    for (const name of ['try-1', 'try-2']) {
      await branch(name);
      await fs.writeFile(p(name, `outbox/${name}.md`), `${name}\n`);
    }
    const t1 = await lease('demo/try-1', '--principal', 'alice');
    expect((await proposed(t1, 'demo/try-1', 'attempt 1')).state).toBe('merged');
    const t2 = await lease('demo/try-2', '--principal', 'alice');
    const r = await d.nasJson('branch', 'discard', 'demo/try-2');
    expect(r.recycled).toEqual(['outbox/try-2.md']);
    expect(r.revokedLeases).toEqual([t2.split('.')[1]]);
    // A branch created again under the same name is not the old lease's.
    await branch('try-2');
    await fs.writeFile(p('try-2', 'outbox/owner.md'), 'owner\n');
    expect((await propose(t2, 'demo/try-2')).stderr).toMatch(/is revoked/);
    expect((await d.nasJson('branch', 'discard', 'demo/try-2')).recycled).toEqual(['outbox/owner.md']);
    expect((await fs.readdir(d.mnt)).includes('demo@try-2')).toBe(false);
    expect((await d.nasJson('branch', 'list', 'demo')).map((b: any) => b.name)).not.toContain('try-2');
    const trash = await d.nasJson('trash', 'list', 'demo');
    const record = trash.find((x: any) => x.path === 'outbox/try-2.md' && x.branch === 'try-2');
    expect(record).toBeTruthy();
    // Its work can be brought back into another branch.
    expect((await d.nas('trash', 'restore', 'demo', 'outbox/try-2.md', '--id', record.id, '--branch', 'try-1')).code).toBe(0);
    expect(await fs.readFile(p('try-1', 'outbox/try-2.md'), 'utf8')).toBe('try-2\n');
  });
});
