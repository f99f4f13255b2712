import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { TestDaemon, eventually, run } from '../helpers.js';

/**
 * One owner rule for what has no metadata record (the template's files): the Home's owner account (root here) in
 * every view, main, a branch, a branch under a lease, inside a run. A branch's write-lease principals share the
 * owner's rights there through a POSIX ACL entry the kernel checks; nobody else gets them, and they end with the
 * lease. Checked with real users (setpriv), getfacl, ls and a real `nas run`.
 */
const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');
const AGENT = 4252;
const OTHER = 4253;
const asUser = (uid: number, script: string) => run('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'sh', '-c', script]);
const owners = async (file: string) => {
  const st = await fs.stat(file);
  return [st.uid, st.gid];
};
const acl = async (file: string) => {
  const r = await run('getfacl', ['-cn', file]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim().split('\n');
};

describe('one owner for what has no record', () => {
  let d: TestDaemon;
  let shared: string;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  const lease = async (spec: string, ...flags: string[]) => {
    const r = await d.nas('lease', 'issue', spec, ...flags);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    // The test's temporary directory is private to root; the users need to reach the mount inside it.
    await fs.chmod(d.dir, 0o755);
    shared = `${d.dir}/shared`;
    await fs.mkdir(shared);
    await fs.chmod(shared, 0o1777);
    for (const b of ['plain', 'leased', 'ending']) expect((await d.nas('branch', 'create', `demo/${b}`)).code).toBe(0);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it("shows the template's files as the Home owner's in main, in a branch, under a lease and inside a run", async () => {
    await lease('demo/leased', '--principal', String(AGENT), '--ttl', '1h');
    for (const rel of ['', 'AGENTS.md', 'outbox', 'memory/MEMORY.md', 'inbox']) {
      expect(await owners(d.path('demo', rel)), `main ${rel}`).toEqual([0, 0]);
      expect(await owners(p('plain', rel)), `plain ${rel}`).toEqual([0, 0]);
      expect(await owners(p('leased', rel)), `leased ${rel}`).toEqual([0, 0]);
    }
    const r = await run(process.execPath, [CLI, '--socket', d.socket, 'run', 'demo', '--user', 'nobody', '--no-propose', '--', 'sh', '-c',
      `stat -c '%u %g %n' . AGENTS.md outbox memory/MEMORY.md > ${shared}/owners`], {
      env: { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' },
    });
    expect(r.code, r.stderr).toBe(0);
    expect((await fs.readFile(`${shared}/owners`, 'utf8')).trim().split('\n')).toEqual(['0 0 .', '0 0 AGENTS.md', '0 0 outbox', '0 0 memory/MEMORY.md']);
  });

  it("gives the lease's principal the owner's rights through an ACL entry, and nobody else", async () => {
    await lease('demo/leased', '--principal', String(AGENT), '--ttl', '1h');
    // The branch shows the entry (ls marks it; the modes stay as they are); main and an unleased branch have none.
    expect(await acl(p('leased', 'outbox'))).toEqual(['user::rwx', `user:${AGENT}:rwx`, 'group::r-x', 'mask::rwx', 'other::r-x']);
    expect(await acl(p('leased', 'AGENTS.md'))).toEqual(['user::rw-', `user:${AGENT}:rw-`, 'group::r--', 'mask::rw-', 'other::r--']);
    expect(await acl(d.path('demo', 'outbox'))).toEqual(['user::rwx', 'group::r-x', 'other::r-x']);
    expect(await acl(p('plain', 'outbox'))).toEqual(['user::rwx', 'group::r-x', 'other::r-x']);
    expect((await run('ls', ['-ld', p('leased', 'outbox')])).stdout).toMatch(/^drwxr-xr-x\+ /);
    expect((await run('ls', ['-ld', d.path('demo', 'outbox')])).stdout).toMatch(/^drwxr-xr-x /);
    // The inbox: its owner's and the sharers' (its group bits show the mask), on main its owner's alone.
    expect((await run('ls', ['-ld', p('leased', 'inbox')])).stdout).toMatch(/^drwxrwx---\+ /);
    expect(await acl(p('leased', 'inbox'))).toEqual(['user::rwx', `user:${AGENT}:rwx`, 'group::---', 'mask::rwx', 'other::---']);
    expect((await run('ls', ['-ld', d.path('demo', 'inbox')])).stdout).toMatch(/^drwx------ /);

    // The principal makes files in the owner's folders and edits the owner's files; they stay the owner's.
    const wrote = await asUser(AGENT, `echo mine > ${p('leased', 'outbox/agent.md')} && echo more >> ${p('leased', 'AGENTS.md')}`);
    expect(wrote.code, wrote.stderr).toBe(0);
    expect(await owners(p('leased', 'outbox/agent.md'))).toEqual([AGENT, AGENT]);
    expect(await owners(p('leased', 'AGENTS.md'))).toEqual([0, 0]);
    await d.sync('demo/leased');
    expect((await d.gitBlob('leased:AGENTS.md')).toString()).toMatch(/more\n$/);
    expect((await d.gitBlob('leased:.nas-meta/AGENTS.md')).toString()).toMatch(/mode=100644 uid=0 gid=0 /);
    // Only an owner changes an owner's modes, as on any disk.
    expect((await asUser(AGENT, `chmod 0600 ${p('leased', 'AGENTS.md')}`)).stderr).toMatch(/Operation not permitted/);

    // Anyone else: the modes' rights only.
    const other = await asUser(OTHER, `echo theirs > ${p('leased', 'outbox/other.md')}`);
    expect(other.code).not.toBe(0);
    expect(other.stderr).toMatch(/Permission denied/);
    // The inbox is its owner's and its sharers' in the branch; on main, the owner's alone.
    expect((await asUser(AGENT, `cat ${p('leased', 'inbox/README.md')} > /dev/null`)).code).toBe(0);
    expect((await asUser(OTHER, `cat ${p('leased', 'inbox/README.md')}`)).stderr).toMatch(/Permission denied/);
    expect((await asUser(AGENT, `cat ${d.path('demo', 'inbox/README.md')}`)).stderr).toMatch(/Permission denied/);
    // A file moved into the inbox becomes the owner's and the sharers' alone (and the inbox itself lets no one else in).
    await fs.writeFile(p('leased', 'outbox/task.md'), 'task\n');
    expect(await acl(p('leased', 'outbox/task.md'))).toContain('group::r--');
    await fs.rename(p('leased', 'outbox/task.md'), p('leased', 'inbox/task.md'));
    await eventually(async () => (await acl(p('leased', 'inbox/task.md'))).includes('group::---'), 'the moved file to lose its group rights');
    expect((await run('ls', ['-l', p('leased', 'inbox/task.md')])).stdout).toMatch(/^-rw-rw----\+ /);
  });

  it("keeps a shared file's mode as the owner sets it; what the owner keeps from others is not shared", async () => {
    await lease('demo/leased', '--principal', String(AGENT), '--ttl', '1h');
    await fs.writeFile(p('leased', 'outbox/modes.md'), 'x\n');
    expect(await acl(p('leased', 'outbox/modes.md'))).toContain(`user:${AGENT}:rw-`);
    for (const mode of [0o755, 0o640, 0o777, 0o4750]) {
      await fs.chmod(p('leased', 'outbox/modes.md'), mode);
      expect((await fs.stat(p('leased', 'outbox/modes.md'))).mode & 0o7777).toBe(mode);
    }
    await run('chmod', ['0644', p('leased', 'outbox/modes.md')]);
    await run('chmod', ['+x', p('leased', 'outbox/modes.md')]);
    expect(await acl(p('leased', 'outbox/modes.md'))).toEqual(['user::rwx', `user:${AGENT}:rwx`, 'group::r-x', 'mask::rwx', 'other::r-x']);
    // What the owner keeps from others is not shared.
    await run('chmod', ['0640', p('leased', 'outbox/modes.md')]);
    expect(await acl(p('leased', 'outbox/modes.md'))).toEqual(['user::rw-', 'group::r--', 'other::---']);
    expect((await asUser(AGENT, `cat ${p('leased', 'outbox/modes.md')}`)).stderr).toMatch(/Permission denied/);
    await run('chmod', ['0600', p('leased', 'outbox/modes.md')]);
    await d.sync('demo/leased');
    expect((await d.gitBlob('leased:.nas-meta/outbox/modes.md')).toString()).toMatch(/^mode=100600 uid=0 gid=0 /);
  });

  it('takes the entry away when the lease is revoked or runs out, without a request', async () => {
    const token = await lease('demo/ending', '--principal', String(AGENT), '--ttl', '1h');
    expect(await acl(p('ending', 'outbox'))).toContain(`user:${AGENT}:rwx`);
    expect((await asUser(AGENT, `echo a > ${p('ending', 'outbox/a.md')}`)).code).toBe(0);
    expect((await d.nas('lease', 'revoke', 'demo', token.split('.')[1])).code).toBe(0);
    expect(await acl(p('ending', 'outbox'))).toEqual(['user::rwx', 'group::r-x', 'other::r-x']);
    expect((await asUser(AGENT, `echo b > ${p('ending', 'outbox/b.md')}`)).stderr).toMatch(/Permission denied/);

    // A lease that expires: the periodic pass (every 5 s) tells the kernel, whose cache would keep it an hour.
    await lease('demo/ending', '--principal', String(AGENT), '--ttl', '3s');
    expect(await acl(p('ending', 'outbox'))).toContain(`user:${AGENT}:rwx`);
    await eventually(async () => !(await acl(p('ending', 'outbox'))).includes(`user:${AGENT}:rwx`), 'the expired lease to leave the ACL', 20_000);
    expect((await asUser(AGENT, `cat ${p('ending', 'inbox/README.md')}`)).stderr).toMatch(/Permission denied/);
  });
});
