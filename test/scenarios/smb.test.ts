import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import { TestDaemon, eventually, run, type RunResult } from '../helpers.js';

/**
 * The Homes through Samba: a real smbd on loopback (its own port, private, lock, state, cache and pid
 * directories, started and stopped here by its pid) serving the share `nas share smb` installed into a
 * generated smb.conf, driven with smbclient as a Unix account made for the test.
 */

/** The SMB user: a Unix account of its own (removed after), with its own password in the test's passdb. */
const USER = `nassmb${process.pid}`.slice(0, 31);
const PASS = 'Smb-test-pw1';
/** catia shows ':' (a checkpoint or commit view's name) as U+F022, as macOS and Windows (SFM) do. */
const COLON = '\uf022';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

/** smb.conf's [global] for a private smbd: nothing of the machine's Samba is read or written. */
function globalConf(dir: string, port: number): string {
  return `[global]
  server role = standalone server
  smb ports = ${port}
  interfaces = 127.0.0.1
  bind interfaces only = yes
  private dir = ${dir}/private
  lock directory = ${dir}/lock
  state directory = ${dir}/state
  cache directory = ${dir}/cache
  pid directory = ${dir}/pid
  ncalrpc dir = ${dir}/ncalrpc
  passdb backend = tdbsam:${dir}/private/passdb.tdb
  log file = ${dir}/log.%m
  map to guest = never
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  rpc start on demand helpers = no
`;
}

class Smbd {
  log = '';
  private constructor(readonly child: ChildProcess, readonly port: number, readonly conf: string) {
    child.stdout!.on('data', (b) => (this.log += b));
    child.stderr!.on('data', (b) => (this.log += b));
  }

  /**
   * smbd in the foreground, killed with us (setpriv --pdeathsig) should the test die. In a process group of its
   * own (detached): an smbd told to stop signals its whole group, which would otherwise be vitest's.
   */
  static async start(conf: string, port: number): Promise<Smbd> {
    const child = spawn('setpriv', ['--pdeathsig', 'TERM', 'smbd', '--foreground', '--no-process-group', '--debug-stdout', '-s', conf], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const s = new Smbd(child, port, conf);
    try {
      await eventually(async () => {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`smbd exited: ${s.log}`);
        return listening(port);
      }, `smbd on port ${port}`, 15_000);
    } catch (err) {
      await s.stop();
      throw err;
    }
    return s;
  }

  /** smbclient against the share, `cmds` separated by ';'. Paths in the share use backslashes. */
  client(cmds: string, user = `${USER}%${PASS}`): Promise<RunResult> {
    return run('smbclient', [`//127.0.0.1/agents`, '-p', String(this.port), '-s', this.conf, '-U', user, '-c', cmds]);
  }

  /** SIGTERM to its pid (it ends its helpers), SIGKILL after 10 s. */
  async stop(): Promise<void> {
    const c = this.child;
    if (c.exitCode !== null || c.signalCode !== null) return;
    const gone = new Promise((r) => c.once('exit', r));
    process.kill(c.pid!, 'SIGTERM');
    const timer = setTimeout(() => c.exitCode === null && c.signalCode === null && process.kill(c.pid!, 'SIGKILL'), 10_000);
    await gone;
    clearTimeout(timer);
  }
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('SMB share (Samba) of the Homes', () => {
  let d: TestDaemon;
  let smb: Smbd | undefined;
  let uid = -1;
  let userMade = false;
  let sambaDir: string;
  let local: string;
  const put = async (name: string, content: string | Buffer) => {
    await fs.writeFile(`${local}/${name}`, content);
    return `${local}/${name}`;
  };

  beforeAll(async () => {
    d = await TestDaemon.withBranch('smb');
    const made = await run('useradd', ['--no-create-home', '--shell', '/usr/sbin/nologin', '--user-group', USER]);
    if (made.code !== 0) throw new Error(`useradd ${USER}: ${made.stderr}`);
    userMade = true;
    uid = Number((await run('id', ['-u', USER])).stdout.trim());
    // The SMB user writes in the branch as any account does: under a write lease naming it.
    const lease = await d.nas('lease', 'issue', 'demo/smb', '--principal', USER, '--ttl', '2h');
    expect(lease.code, lease.stderr).toBe(0);
    const ck = await d.nas('checkpoint', 'create', 'demo', 'before-smb');
    expect(ck.code, ck.stderr).toBe(0);

    sambaDir = `${d.dir}/samba`;
    local = `${d.dir}/local`;
    for (const sub of ['private', 'lock', 'state', 'cache', 'pid', 'ncalrpc']) await fs.mkdir(`${sambaDir}/${sub}`, { recursive: true });
    await fs.mkdir(local);
    const conf = `${sambaDir}/smb.conf`;
    const port = await freePort();
    await fs.writeFile(conf, globalConf(sambaDir, port));
    // The share as an operator installs it: nas share smb, asked twice (the second changes nothing).
    const installed = await d.nas('share', 'smb', '--smb-conf', conf);
    expect(installed.code, installed.stderr).toBe(0);
    expect(installed.stdout).toMatch(/installed the SMB share \[agents\] of .*: wrote .*agent-nas\.conf, added its include line/);
    expect(installed.stdout).toMatch(/testparm: ok/);
    const again = await d.nasJson('share', 'smb', '--smb-conf', conf);
    expect(again).toMatchObject({ wrote_file: false, added_include: false, mount: d.mnt, file: `${sambaDir}/agent-nas.conf` });
    expect((await fs.readFile(conf, 'utf8')).match(/^include = /gm)).toHaveLength(1);
    const printed = await d.nas('share', 'smb', '--print');
    expect(printed.stdout).toBe(await fs.readFile(`${sambaDir}/agent-nas.conf`, 'utf8'));
    expect(printed.stdout).toMatch(new RegExp(`^\\s*path = ${d.mnt}$`, 'm'));

    const pw = await run('smbpasswd', ['-c', conf, '-s', '-a', USER], { input: `${PASS}\n${PASS}\n` });
    expect(pw.code, pw.stderr).toBe(0);
    smb = await Smbd.start(conf, port);
  });

  afterAll(async () => {
    await smb?.stop();
    if (userMade) await run('userdel', [USER]);
    await d?.cleanup();
  });

  it('lists the Homes and main, and gets a file byte for byte', async () => {
    const top = await smb!.client('ls');
    expect(top.code, top.stdout).toBe(0);
    expect(top.stdout).toMatch(/^\s+demo\s+D\s/m);
    expect(top.stdout).toMatch(/^\s+demo@smb\s+D\s/m);
    expect(top.stdout).toContain(`demo${COLON}before-smb`);
    const main = await smb!.client('ls demo\\*');
    for (const name of ['AGENTS.md', 'memory', 'outbox', 'workspace']) expect(main.stdout).toMatch(new RegExp(`^\\s+${name}\\s`, 'm'));
    const got = await smb!.client(`get demo\\AGENTS.md ${local}/AGENTS.md`);
    expect(got.code, got.stderr + got.stdout).toBe(0);
    expect(await fs.readFile(`${local}/AGENTS.md`)).toEqual(await fs.readFile(d.path('demo', 'AGENTS.md')));
  });

  it("puts a file into a branch: a commit naming the SMB user's account in Nas-Writers", async () => {
    const src = await put('notes.md', 'written over SMB\n');
    const r = await smb!.client(`put ${src} demo@smb\\outbox\\notes.md`);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    await d.sync('demo/smb');
    expect((await d.gitBlob('smb:outbox/notes.md')).toString()).toBe('written over SMB\n');
    const message = (await d.git('log', '-1', '--format=%B', 'smb', '--', 'outbox/notes.md')).stdout;
    expect(message).toMatch(new RegExp(`^Nas-Writers: ${USER} \\(uid ${uid}\\)$`, 'm'));
    // The file is the account's, as on a disk; no execute bit from a DOS archive flag.
    const st = await fs.stat(d.path('demo@smb', 'outbox/notes.md'));
    expect([st.uid, st.mode & 0o111]).toEqual([uid, 0]);
  });

  it('refuses a put into main: access denied, write-protected where the mode would let it, nothing changed', async () => {
    const src = await put('intruder.md', 'not on main\n');
    const before = (await d.git('rev-parse', 'main')).stdout;
    const r = await smb!.client(`put ${src} demo\\outbox\\intruder.md`);
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/NT_STATUS_ACCESS_DENIED|NT_STATUS_MEDIA_WRITE_PROTECTED/);
    await expect(fs.access(d.path('demo', 'outbox/intruder.md'))).rejects.toThrow();
    // A file the account owns on main (merged from its branch): the mode allows it, the mount says EROFS.
    const proposed = await d.nas('propose', 'demo/smb', '--into', 'main', '--intent', 'notes over SMB');
    expect(proposed.code, proposed.stderr).toBe(0);
    await eventually(async () => (await fs.stat(d.path('demo', 'outbox/notes.md')).catch(() => null))?.uid === uid, 'notes.md merged into main');
    const merged = (await d.git('rev-parse', 'main')).stdout;
    expect(merged).not.toBe(before);
    const over = await smb!.client(`put ${src} demo\\outbox\\notes.md`);
    expect(over.stdout + over.stderr).toMatch(/NT_STATUS_MEDIA_WRITE_PROTECTED/);
    const gone = await smb!.client('del demo\\outbox\\notes.md');
    expect(gone.stdout + gone.stderr).toMatch(/NT_STATUS_ACCESS_DENIED|NT_STATUS_MEDIA_WRITE_PROTECTED/);
    expect(await fs.readFile(d.path('demo', 'outbox/notes.md'), 'utf8')).toBe('written over SMB\n');
    expect((await d.git('rev-parse', 'main')).stdout).toBe(merged);
  });

  it('sends a file removed in a branch to the recycle area', async () => {
    const src = await put('gone.md', 'soon in the recycle area\n');
    expect((await smb!.client(`put ${src} demo@smb\\outbox\\gone.md`)).code).toBe(0);
    await d.sync('demo/smb');
    const r = await smb!.client('del demo@smb\\outbox\\gone.md');
    expect(r.code, r.stdout).toBe(0);
    await d.sync('demo/smb');
    const rows = await d.nasJson<{ path: string; branch: string; kind: string }[]>('trash', 'list', 'demo');
    expect(rows).toContainEqual(expect.objectContaining({ path: 'outbox/gone.md', branch: 'smb', kind: 'file' }));
    expect((await d.git('ls-tree', 'smb', 'outbox/gone.md')).stdout).toBe('');
  });

  it('renames in a branch', async () => {
    const src = await put('before.md', 'same bytes\n');
    expect((await smb!.client(`put ${src} demo@smb\\outbox\\before.md`)).code).toBe(0);
    await d.sync('demo/smb');
    const r = await smb!.client('rename demo@smb\\outbox\\before.md demo@smb\\outbox\\after.md');
    expect(r.code, r.stdout).toBe(0);
    await d.sync('demo/smb');
    expect((await d.git('ls-tree', '--name-only', 'smb', 'outbox/')).stdout.split('\n')).toEqual(expect.arrayContaining(['outbox/after.md']));
    expect((await d.git('ls-tree', 'smb', 'outbox/before.md')).stdout).toBe('');
    expect((await d.gitBlob('smb:outbox/after.md')).toString()).toBe('same bytes\n');
    expect((await d.git('log', '-1', '--format=%B', 'smb')).stdout).toMatch(new RegExp(`^Nas-Writers: ${USER} \\(uid ${uid}\\)$`, 'm'));
  });

  it('reads checkpoint and commit views (":" shown as U+F022), read-only', async () => {
    const ck = await smb!.client(`get demo${COLON}before-smb\\AGENTS.md ${local}/ck.md`);
    expect(ck.code, ck.stdout + ck.stderr).toBe(0);
    expect(await fs.readFile(`${local}/ck.md`)).toEqual(await d.gitBlob('refs/nas/checkpoints/before-smb:AGENTS.md'));
    const commit = (await d.git('rev-parse', '--short=12', 'smb')).stdout.trim();
    const view = await smb!.client(`ls demo${COLON}${commit}\\outbox\\*`);
    expect(view.code, view.stdout + view.stderr).toBe(0);
    expect(view.stdout).toMatch(/^\s+after\.md\s/m);
    const src = await put('into-history.md', 'no\n');
    const w = await smb!.client(`put ${src} demo${COLON}before-smb\\outbox\\into-history.md`);
    expect(w.stdout + w.stderr).toMatch(/NT_STATUS_ACCESS_DENIED|NT_STATUS_MEDIA_WRITE_PROTECTED/);
  });

  it('keeps workspace/ as scratch: written, never committed', async () => {
    const src = await put('scratch.txt', 'scratch\n');
    expect((await smb!.client(`put ${src} demo@smb\\workspace\\scratch.txt`)).code).toBe(0);
    await d.sync('demo/smb');
    expect(await fs.readFile(d.path('demo@smb', 'workspace/scratch.txt'), 'utf8')).toBe('scratch\n');
    expect((await d.git('ls-tree', '-r', '--name-only', 'smb')).stdout).not.toMatch(/^workspace\/scratch\.txt$/m);
  });

  it('refuses streams and the AppleDouble files macOS would leave', async () => {
    const src = await put('s.md', 'x\n');
    const stream = await smb!.client(`put ${src} demo@smb\\outbox\\s.md:stream`);
    expect(stream.code).not.toBe(0);
    const apple = await smb!.client(`put ${src} demo@smb\\outbox\\._s.md`);
    expect(apple.stdout + apple.stderr).toMatch(/NT_STATUS_OBJECT_NAME_NOT_FOUND/);
    await expect(fs.access(d.path('demo@smb', 'outbox/._s.md'))).rejects.toThrow();
  });

  it('carries a 100 MB file into a branch and back, and commits it', async () => {
    const big = randomBytes(100_000_000);
    const src = await put('big.bin', big);
    const r = await smb!.client(`put ${src} demo@smb\\outbox\\big.bin`);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const back = await smb!.client(`get demo@smb\\outbox\\big.bin ${local}/big.back`);
    expect(back.code, back.stdout + back.stderr).toBe(0);
    expect(sha(await fs.readFile(`${local}/big.back`))).toBe(sha(big));
    await d.sync('demo/smb');
    expect((await d.git('cat-file', '-s', 'smb:outbox/big.bin')).stdout.trim()).toBe('100000000');
    await fs.rm(`${local}/big.back`);
    await fs.rm(src);
  }, 180_000);

  it('refuses a bad login: a wrong password, an unknown account, a guest', async () => {
    for (const who of [`${USER}%wrong-password`, 'no-such-account%whatever']) {
      const r = await smb!.client('ls', who);
      expect(r.code).not.toBe(0);
      expect(r.stdout + r.stderr).toMatch(/NT_STATUS_LOGON_FAILURE/);
    }
    const guest = await smb!.client('ls', '%');
    expect(guest.code).not.toBe(0);
    expect(guest.stdout + guest.stderr).toMatch(/NT_STATUS_ACCESS_DENIED|NT_STATUS_LOGON_FAILURE/);
  });
});
