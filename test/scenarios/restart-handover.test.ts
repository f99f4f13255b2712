import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import { TestDaemon, eventually } from '../helpers.js';

/**
 * A restart that clients do not see: nasd keeps its kernel connection in systemd's file descriptor store (here a
 * stand-in speaking the same protocol), and the next nasd takes it over. A shell inside the mount and a file held
 * open for writing keep working across it, and requests made while no nasd runs wait instead of failing. A reload
 * (systemctl reload, SIGHUP) does the same in one process: nasd becomes the next nasd, with nothing for systemd to do.
 */

/** Send a line to a child and read what it prints up to the marker it echoes back. */
function ask(child: ChildProcess, line: string): Promise<string> {
  return new Promise((resolve) => {
    let out = '';
    const marker = `--done-${Math.random().toString(36).slice(2)}--`;
    const onData = (chunk: Buffer) => {
      out += chunk;
      if (out.includes(marker)) {
        child.stdout!.off('data', onData);
        resolve(out.slice(0, out.indexOf(marker)));
      }
    };
    child.stdout!.on('data', onData);
    child.stdin!.write(`${line}\necho ${marker}\n`);
  });
}

/**
 * A shell with its cwd in branch `name`, a file held open for writing and a directory held open all carry on
 * across `restart` (a request made during it waits), and nothing is lost. The processes go into `children`.
 */
async function carriesOn(d: TestDaemon, name: string, restart: () => Promise<void>, children: ChildProcess[]): Promise<void> {
  const branch = d.path(`demo@${name}`);
  await fs.mkdir(`${branch}/outbox/deep`, { recursive: true });
  const shell = spawn('bash', ['--norc'], { cwd: `${branch}/outbox/deep`, stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(shell);
  shell.stderr!.on('data', () => undefined);
  expect(await ask(shell, 'echo before > a.txt; cat a.txt; pwd')).toBe(`before\n${branch}/outbox/deep\n`);
  // A writer with its file open across the restart: it writes once before, once after, then closes.
  const writer = spawn('bash', ['--norc', '-c', `exec 3>${branch}/outbox/held.txt; while read -r line; do echo "$line" >&3; echo "--done-$line--"; done`], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(writer);
  writer.stdin!.write('first\n');
  await new Promise<void>((resolve) => writer.stdout!.on('data', (c: Buffer) => c.toString().includes('--done-first--') && resolve()));

  // A directory open across the restart (its handle is the old nasd's): listed again after it.
  const py = 'import os,sys\nfd=os.open(sys.argv[1], os.O_RDONLY|os.O_DIRECTORY)\nfor line in sys.stdin:\n  print(" ".join(sorted(os.listdir(fd))), flush=True)';
  const lister = spawn('python3', ['-c', py, `${branch}/outbox/deep`], { stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(lister);
  const listing = () =>
    new Promise<string>((resolve) => {
      lister.stdout!.once('data', (c: Buffer) => resolve(c.toString().trim()));
      lister.stdin!.write('ls\n');
    });
  expect(await listing()).toBe('a.txt');

  // A request made while no nasd serves waits for the next one (no "Transport endpoint is not connected").
  const restarted = restart();
  const during = fs.readdir(`${branch}/outbox`);
  await restarted;
  expect(await during).toEqual(expect.arrayContaining(['deep', 'held.txt']));

  await fs.writeFile(`${branch}/outbox/deep/b.txt`, 'b\n');
  expect(await listing()).toBe('a.txt b.txt');
  // The shell's cwd is still there: relative paths, pwd, new files.
  expect(await ask(shell, 'cat a.txt; echo after >> a.txt; cat a.txt; pwd; ls')).toBe(`before\nbefore\nafter\n${branch}/outbox/deep\na.txt\nb.txt\n`);
  // The writer's descriptor writes on, and its close commits both lines.
  writer.stdin!.end('second\n');
  await new Promise((resolve) => writer.once('exit', resolve));
  expect(await fs.readFile(`${branch}/outbox/held.txt`, 'utf8')).toBe('first\nsecond\n');
  const committed = async (rel: string) => (await d.gitBlob(`${name}:${rel}`).catch(() => Buffer.from(''))).toString();
  await eventually(async () => (await committed('outbox/held.txt')) === 'first\nsecond\n', 'the held file committed whole');
  await eventually(async () => (await committed('outbox/deep/a.txt')) === 'before\nafter\n', "the shell's file committed");
  lister.stdin!.end();
  expect(d.log).toContain('took the kernel connection over');
}

describe('restart with the kernel connection kept', () => {
  let d: TestDaemon;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    d = await TestDaemon.start({ fdStore: true, extraArgs: ['--demo'] });
    const r = await d.nas('branch', 'create', 'demo/kept');
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await d?.cleanup();
  });

  it('keeps a shell in a branch and a file open for writing working across the restart, losing nothing', async () => {
    await carriesOn(d, 'kept', () => d.restartKeepingConnection(), children);
  });

  it('keeps /dev/fuse to nasd alone: the git processes it starts do not inherit it', async () => {
    const pids = (await fs.readdir('/proc')).filter((p) => /^\d+$/.test(p));
    const nasd = [] as number[];
    for (const pid of pids) {
      const cmd = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (cmd.startsWith(process.execPath) && cmd.includes(d.state) && cmd.includes('daemon/main.js')) nasd.push(Number(pid));
    }
    expect(nasd).toHaveLength(1);
    // Its /dev/fuse descriptor is close-on-exec (flags in fdinfo are octal; O_CLOEXEC is 02000000).
    let found = 0;
    for (const fd of await fs.readdir(`/proc/${nasd[0]}/fd`)) {
      const target = await fs.readlink(`/proc/${nasd[0]}/fd/${fd}`).catch(() => '');
      if (target !== '/dev/fuse') continue;
      const flags = /flags:\s+([0-7]+)/.exec(await fs.readFile(`/proc/${nasd[0]}/fdinfo/${fd}`, 'utf8'))![1];
      expect(parseInt(flags, 8) & 0o2000000).not.toBe(0);
      found++;
    }
    expect(found).toBeGreaterThan(0);
  });
});

describe('reload: nasd becomes the next nasd in the same process', () => {
  let d: TestDaemon;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    const r = await d.nas('branch', 'create', 'demo/reloaded');
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await d?.cleanup();
  });

  it('keeps a shell, a file held open for writing and an open directory working across a reload, in the same process', async () => {
    const pid = d.child.pid;
    await carriesOn(d, 'reloaded', () => d.reload(), children);
    expect(d.child.exitCode).toBeNull();
    expect(d.child.pid).toBe(pid);
    expect(d.log).toContain('this process becomes the next nasd');
    // And it answers its control socket as before.
    expect((await d.nas('status')).code).toBe(0);
  });

  it('survives SIGHUPs that come while a reload is in progress (kill -HUP, a logrotate): one reload, nothing cut off', async () => {
    const pid = d.child.pid!;
    const readies = () => d.log.split('"nasd ready"').length - 1;
    const held = spawn('bash', ['--norc', '-c', `exec 3>${d.path('demo@reloaded', 'outbox/across-hups.txt')}; while read -r line; do echo "$line" >&3; echo "--done-$line--"; done`], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(held);
    const write = (line: string) => new Promise<void>((resolve) => {
      const onData = (c: Buffer) => c.toString().includes(`--done-${line}--`) && (held.stdout!.off('data', onData), resolve());
      held.stdout!.on('data', onData);
      held.stdin!.write(`${line}\n`);
    });
    await write('before');
    // A second SIGHUP at several moments of the reload (the next nasd starts up for seconds), then a storm of 8.
    for (const gap of [150, 600, 1500, 3000]) {
      const before = readies();
      process.kill(pid, 'SIGHUP');
      await new Promise((r) => setTimeout(r, gap));
      process.kill(pid, 'SIGHUP');
      await eventually(async () => d.child.exitCode !== null || readies() > before, `nasd serving again after a SIGHUP ${gap} ms into its reload`, 60_000);
      expect(d.child.exitCode, d.log.slice(-3000)).toBeNull();
    }
    process.kill(pid, 'SIGHUP');
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 40));
      process.kill(pid, 'SIGHUP');
    }
    await eventually(async () => d.child.exitCode !== null || (await d.nas('status')).code === 0, 'nasd answering after a storm of SIGHUPs', 60_000);
    expect(d.child.exitCode, d.log.slice(-3000)).toBeNull();
    expect(d.child.pid).toBe(pid);
    // The file held open all along takes another line and closes: nothing was cut off, nothing lost.
    await write('after');
    held.stdin!.end();
    await new Promise((r) => held.once('exit', r));
    expect(await fs.readFile(d.path('demo@reloaded', 'outbox/across-hups.txt'), 'utf8')).toBe('before\nafter\n');
  });
});

describe('reload with every node on a private id (above 2^53, where a double loses the last digits)', () => {
  let d: TestDaemon;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    // The binding's test hook: ids from 2^62 for every node, as inode-number collisions give some in use.
    d = await TestDaemon.start({ env: { NASD_TEST_PRIVATE_IDS: '1' }, extraArgs: ['--demo'] });
    const r = await d.nas('branch', 'create', 'demo/private');
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await d?.cleanup();
  });

  it('keeps a shell, a file held open for writing and an open directory on their own nodes across a reload', async () => {
    // Two files open for reading in two folders, whose ids differ by less than a double's step at 2^62.
    const branch = d.path('demo@private');
    await fs.mkdir(`${branch}/outbox/one`, { recursive: true });
    await fs.mkdir(`${branch}/outbox/two`, { recursive: true });
    await fs.writeFile(`${branch}/outbox/one/x.txt`, 'one\n');
    await fs.writeFile(`${branch}/outbox/two/x.txt`, 'two, longer\n');
    const held = await Promise.all(['one', 'two'].map((dir) => fs.open(`${branch}/outbox/${dir}/x.txt`, 'r')));
    try {
      await carriesOn(d, 'private', () => d.reload(), children);
      expect((await held[0].stat()).size).toBe(4);
      expect((await held[1].stat()).size).toBe(12);
      expect((await held[1].read(Buffer.alloc(32), 0, 32, 0)).buffer.toString('utf8', 0, 12)).toBe('two, longer\n');
      expect(await fs.readFile(`${branch}/outbox/one/x.txt`, 'utf8')).toBe('one\n');
    } finally {
      await Promise.all(held.map((h) => h.close()));
    }
  });
});
