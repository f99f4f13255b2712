import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, run } from '../helpers.js';

/** What `ls -a`, `ls -lt` and `df` see in a branch view, checked with the real tools. */
describe('listing, times and space', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@meta', rel);
  const sync = async () => {
    const r = await d.nas('sync', 'demo/meta');
    expect(r.code, r.stderr).toBe(0);
  };
  const df = async (dir: string) => {
    const r = await run('df', ['-B1', '--output=size,used,avail', dir]);
    expect(r.code, r.stderr).toBe(0);
    const [size, used, avail] = r.stdout.trim().split('\n')[1].trim().split(/\s+/).map(Number);
    return { size, used, avail };
  };

  beforeAll(async () => {
    d = await TestDaemon.withBranch('meta');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('lists . and .. in every directory, as a disk does', async () => {
    for (const dir of [d.mnt, d.path('demo'), p(''), p('outbox'), p('memory/notes')]) {
      const r = await run('ls', ['-a1', dir]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.split('\n').slice(0, 2)).toEqual(['.', '..']);
    }
  });

  it('keeps the time of a file the branch did not change when other files are committed', async () => {
    const before = (await fs.stat(p('AGENTS.md'))).mtimeMs;
    // git keeps whole seconds: the next commit's time must differ from AGENTS.md's for a wrong time to show.
    await new Promise((r) => setTimeout(r, 1100));
    await fs.writeFile(p('outbox/new.md'), 'new\n');
    await sync();
    expect((await fs.stat(p('AGENTS.md'))).mtimeMs).toBe(before);
    expect((await fs.stat(p('outbox/new.md'))).mtimeMs).toBeGreaterThan(before);
    // A commit changes nothing a view shows, so the mount kept AGENTS.md's attributes: a branch made in the Home
    // makes it let go of them, and nasd is asked again.
    expect((await d.nas('branch', 'create', 'demo/meta-later')).code).toBe(0);
    expect((await fs.stat(p('AGENTS.md'))).mtimeMs).toBe(before);
  });

  it('shows the branch quota in df, and the space a write uses', async () => {
    const disk = await df(d.state);
    const first = await df(p(''));
    // The default quota is 2 GiB: df shows that (or the disk, if the disk is smaller).
    expect(first.size).toBe(Math.min(2 * 1024 ** 3, disk.size));
    await fs.writeFile(p('outbox/mib.bin'), Buffer.alloc(1 << 20, 7));
    const second = await df(p(''));
    expect(second.used - first.used).toBeGreaterThanOrEqual(1 << 20);
    expect(second.avail).toBeLessThan(first.avail);
  });
});

/**
 * Owners, modes, times and inode numbers as a disk keeps them, through restarts, merges and commits, checked
 * with the tools that rely on them. The POSIX behaviour itself (owner of what a user makes, chown, setgid,
 * UTIME_OMIT, nanosecond times, inode numbers) is in test/posix, on every kind of place.
 */
describe('metadata that lasts', () => {
  let d: TestDaemon;
  const p = (rel: string) => d.path('demo@md', rel);
  const as = (uid: number, gid: number, script: string) =>
    run('setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', 'sh', '-c', script]);
  const statOf = async (path: string, fmt: string) => (await run('stat', ['-c', fmt, path])).stdout.trim();

  beforeAll(async () => {
    d = await TestDaemon.withBranch('md');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('keeps every mode as set, through a restart', async () => {
    const modes = [0o600, 0o640, 0o644, 0o700, 0o755, 0o444, 0o4755, 0o1777];
    for (const m of modes) {
      await fs.writeFile(p(`outbox/mode-${m.toString(8)}`), 'x');
      await fs.chmod(p(`outbox/mode-${m.toString(8)}`), m);
    }
    const r = await d.nas('sync', 'demo/md');
    expect(r.code, r.stderr).toBe(0);
    await d.stop();
    d = await d.restart();
    for (const m of modes) expect((await fs.stat(p(`outbox/mode-${m.toString(8)}`))).mode & 0o7777).toBe(m);
  });

  it('round-trips tar -p and rsync -a: a second rsync transfers nothing', async () => {
    const src = `${d.dir}/src`;
    await fs.mkdir(`${src}/sub`, { recursive: true });
    for (const [name, mode] of [['a', 0o600], ['b', 0o755], ['sub/c', 0o640]] as const) {
      await fs.writeFile(`${src}/${name}`, name);
      await fs.chmod(`${src}/${name}`, mode);
    }
    await fs.utimes(`${src}/a`, new Date('2010-01-01T00:00:00Z'), new Date('2010-01-01T00:00:00Z'));
    const first = await run('rsync', ['-a', `${src}/`, p('outbox/mirror/')]);
    expect(first.code, first.stderr).toBe(0);
    const again = await run('rsync', ['-a', '--itemize-changes', `${src}/`, p('outbox/mirror/')]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe('');
    expect(await statOf(p('outbox/mirror/a'), '%a %Y')).toBe(`600 ${Date.parse('2010-01-01T00:00:00Z') / 1000}`);
    const tarball = `${d.dir}/src.tar`;
    expect((await run('tar', ['-cf', tarball, '-C', src, '.'])).code).toBe(0);
    await fs.mkdir(p('outbox/untar'));
    const x = await run('tar', ['-xpf', tarball, '-C', p('outbox/untar')]);
    expect(x.code, x.stderr).toBe(0);
    expect(await statOf(p('outbox/untar/sub/c'), '%a')).toBe('640');
    expect(await statOf(p('outbox/untar/a'), '%Y')).toBe(String(Date.parse('2010-01-01T00:00:00Z') / 1000));
  });

  it('lets make rebuild exactly what changed', async () => {
    const dir = p('outbox/build');
    await fs.mkdir(dir);
    await fs.writeFile(`${dir}/Makefile`, 'all: a.out b.out\n%.out: %.in\n\tcp $< $@\n');
    await fs.writeFile(`${dir}/a.in`, 'a1');
    await fs.writeFile(`${dir}/b.in`, 'b1');
    expect((await run('make', ['-C', dir])).stdout).toMatch(/cp a\.in a\.out[\s\S]*cp b\.in b\.out/);
    expect((await run('make', ['-C', dir])).stdout).toMatch(/Nothing to be done/);
    // The kernel stamps times from a clock that moves in ticks of a few milliseconds: b.in must be newer than b.out.
    await new Promise((r) => setTimeout(r, 20));
    await fs.writeFile(`${dir}/b.in`, 'b2');
    const third = await run('make', ['-C', dir]);
    expect(third.stdout).toMatch(/cp b\.in b\.out/);
    expect(third.stdout).not.toMatch(/cp a\.in/);
  });

  // Inode numbers as POSIX has them (stable from lookup to lookup, one per file, shared by hard links) are cases
  // of test/posix; what is left here is a file the branch serves from git, across a restart of nasd.
  it('keeps the inode number of a file served from git across lookups and a restart', async () => {
    const ino = async (rel: string) => (await fs.stat(p(rel))).ino;
    const before = await ino('AGENTS.md');
    await fs.writeFile('/proc/sys/vm/drop_caches', '3');
    expect(await ino('AGENTS.md')).toBe(before);
    expect(await ino('memory/MEMORY.md')).not.toBe(before);
    await d.stop();
    d = await d.restart();
    expect(await ino('AGENTS.md')).toBe(before);
  });

  it('carries mode, owner and times through a merge into main, into new branches and into a git clone', async () => {
    const r = await d.nas('branch', 'create', 'demo/secret');
    expect(r.code, r.stderr).toBe(0);
    const file = d.path('demo@secret', 'outbox/secret.txt');
    await fs.writeFile(file, 'key\n');
    await fs.chmod(file, 0o600);
    await fs.chown(file, 4242, 4343);
    expect((await run('touch', ['-m', '-d', '2001-02-03 04:05:06.123456', file])).code).toBe(0);
    const proposed = await d.nas('propose', 'demo/secret', '--into', 'main', '--intent', 'a secret kept secret');
    expect(proposed.code, proposed.stderr).toBe(0);
    expect(proposed.stdout).toMatch(/merged/);
    const onMain = d.path('demo', 'outbox/secret.txt');
    const expected = '600 4242:4343 2001-02-03 04:05:06.123456';
    const shown = async (path: string) => (await statOf(path, '%a %u:%g %y')).slice(0, expected.length);
    expect(await shown(onMain)).toBe(expected);
    // A branch made after the merge shows the file as main does, and keeps it so when the file is copied up.
    expect((await d.nas('branch', 'create', 'demo/later')).code).toBe(0);
    expect(await shown(d.path('demo@later', 'outbox/secret.txt'))).toBe(expected);
    expect((await run('chmod', ['640', d.path('demo@later', 'outbox/secret.txt')])).code).toBe(0);
    expect(await statOf(d.path('demo@later', 'outbox/secret.txt'), '%a %u:%g')).toBe('640 4242:4343');
    // The record is plain text in the Store, beside the tree, and a clone has it; views never show it.
    const record = await d.gitBlob('main:.nas-meta/outbox/secret.txt');
    expect(record.toString()).toMatch(/^mode=100600 uid=4242 gid=4343 atime=\d+\.\d{9} mtime=981173106\.123456\d{3}\n$/);
    const clone = `${d.dir}/clone`;
    expect((await run('git', ['clone', '-q', `${d.state}/homes/demo.git`, clone])).code).toBe(0);
    expect(await fs.readFile(`${clone}/.nas-meta/outbox/secret.txt`, 'utf8')).toBe(record.toString());
    expect(await fs.readdir(d.path('demo'))).not.toContain('.nas-meta');
    expect((await run('ls', ['-a', d.path('demo@later')])).stdout).not.toContain('.nas-meta');
    expect(await codeOf(fs.mkdir(d.path('demo@later', '.nas-meta')))).toBe('EPERM');
  });

  it('names the accounts that really wrote in each commit and in the merge, beside the principal', async () => {
    expect((await d.nas('branch', 'create', 'demo/who')).code).toBe(0);
    // nobody writes there under a lease (without one, nasd refuses whatever the modes say).
    expect((await d.nas('lease', 'issue', 'demo/who', '--principal', 'nobody')).code).toBe(0);
    const q = (rel: string) => d.path('demo@who', rel);
    const message = async (rev: string) => (await d.git('log', '-1', '--format=%B', rev)).stdout;
    await fs.mkdir(q('outbox/drop'));
    await fs.chmod(q('outbox/drop'), 0o777);
    await d.sync('demo/who');
    expect(await message('refs/heads/who')).toMatch(/^Nas-Writers: root \(uid 0\)$/m);
    // A refused call names no one: the kernel lets nobody try (the folder is 0777), nasd refuses the name.
    const refused = await as(65534, 65534, `echo x > '${q('outbox/drop/.nas-meta')}'`);
    expect(refused.stderr).toMatch(/Operation not permitted/);
    await fs.writeFile(q('outbox/root.md'), 'root\n');
    await d.sync('demo/who');
    expect(await message('refs/heads/who')).toMatch(/^Nas-Writers: root \(uid 0\)$/m);
    expect((await as(65534, 65534, `echo theirs > '${q('outbox/drop/theirs.md')}'`)).code).toBe(0);
    await d.sync('demo/who');
    expect(await message('refs/heads/who')).toMatch(/^Nas-Writers: nobody \(uid 65534\)$/m);
    // A write through a descriptor alone (an append to a file root made, no create, truncate or rename) names its writer too.
    await fs.writeFile(q('outbox/drop/log.md'), 'one\n');
    await fs.chown(q('outbox/drop/log.md'), 65534, 65534);
    await d.sync('demo/who');
    expect(await message('refs/heads/who')).toMatch(/^Nas-Writers: root \(uid 0\)$/m);
    expect((await as(65534, 65534, `echo two >> '${q('outbox/drop/log.md')}'`)).code).toBe(0);
    await d.sync('demo/who');
    expect(await message('refs/heads/who')).toMatch(/^Nas-Writers: nobody \(uid 65534\)$/m);
    const proposed = await d.nas('propose', 'demo/who', '--into', 'main', '--intent', 'a drop folder');
    expect(proposed.code, proposed.stderr).toBe(0);
    // A world-writable folder waits for the owner (mode-risk), who approves it.
    expect(proposed.stdout).toMatch(/waiting .*mode-risk\): outbox\/drop\/ is new with mode 040777 \(world-writable\)/);
    const id = /^PR (\d+) /.exec(proposed.stdout)![1];
    expect((await d.nas('pr', 'approve', 'demo', id)).stdout).toMatch(/merged/);
    const merge = await message('main');
    expect(merge).toMatch(/^Nas-Principal: /m);
    expect(merge).toMatch(/^Nas-Writers: nobody \(uid 65534\), root \(uid 0\)$/m);
    expect((await d.nas('pr', 'show', 'demo', id)).stdout).toMatch(/written by nobody \(uid 65534\), root \(uid 0\)/);
  });

  it("carries a directory's and a symlink's mode, owner and times through a merge, a copy-up and a restart", async () => {
    expect((await d.nas('branch', 'create', 'demo/dirs')).code).toBe(0);
    const q = (rel: string) => d.path('demo@dirs', rel);
    await fs.mkdir(q('outbox/private'));
    await fs.writeFile(q('outbox/private/key'), 'k\n');
    await fs.chown(q('outbox/private'), 4242, 4343);
    await fs.chmod(q('outbox/private'), 0o2750);
    await fs.symlink('private/key', q('outbox/link'));
    await fs.lchown(q('outbox/link'), 4242, 4343);
    expect((await run('touch', ['-h', '-d', '2003-04-05 06:07:08.987654321', q('outbox/link')])).code).toBe(0);
    // Last: making the file inside moved the directory's times.
    expect((await run('touch', ['-d', '2001-02-03 04:05:06.123456789', q('outbox/private')])).code).toBe(0);
    const proposed = await d.nas('propose', 'demo/dirs', '--into', 'main', '--intent', 'a private folder');
    expect(proposed.code, proposed.stderr).toBe(0);
    // A setgid folder waits for the owner (mode-risk), who approves it.
    expect(proposed.stdout).toMatch(/waiting .*mode-risk\): outbox\/private\/ is new with mode 042750 \(setgid\)/);
    expect((await d.nas('pr', 'approve', 'demo', /^PR (\d+) /.exec(proposed.stdout)![1])).stdout).toMatch(/merged/);
    const dirShown = '2750 4242:4343 2001-02-03 04:05:06.123456789';
    const linkShown = '4242:4343 2003-04-05 06:07:08.987654321';
    expect(await statOf(d.path('demo', 'outbox/private'), '%a %u:%g %y')).toMatch(new RegExp(`^${dirShown} `));
    expect(await statOf(d.path('demo', 'outbox/link'), '%u:%g %y')).toMatch(new RegExp(`^${linkShown} `));
    // The kernel checks those owners: others may not look inside.
    expect((await as(65534, 65534, `ls '${d.path('demo', 'outbox/private')}'`)).code).not.toBe(0);
    const record = (await d.gitBlob('main:.nas-meta/outbox/private/.nas-meta')).toString();
    expect(record).toMatch(/^mode=42750 uid=4242 gid=4343 atime=\d+\.\d{9} mtime=981173106\.123456789\n$/);

    // A new branch shows them as main does; appending to the file (a copy-up) leaves the folder's times alone,
    // a new file in it moves them, and its mode and owner stay through a restart.
    expect((await d.nas('branch', 'create', 'demo/dirs2')).code).toBe(0);
    const r = (rel: string) => d.path('demo@dirs2', rel);
    expect(await statOf(r('outbox/private'), '%a %u:%g %y')).toMatch(new RegExp(`^${dirShown} `));
    await fs.appendFile(r('outbox/private/key'), 'more\n');
    expect(await statOf(r('outbox/private'), '%a %u:%g %y')).toMatch(new RegExp(`^${dirShown} `));
    await fs.writeFile(r('outbox/private/new'), 'n\n');
    expect(await statOf(r('outbox/private'), '%a %u:%g %Y')).toMatch(/^2750 4242:4343 (\d+)$/);
    expect(Number((await statOf(r('outbox/private'), '%Y')))).toBeGreaterThan(Date.now() / 1000 - 600);
    expect((await d.nas('sync', 'demo/dirs2')).code).toBe(0);
    await d.stop();
    d = await d.restart();
    expect(await statOf(d.path('demo', 'outbox/private'), '%a %u:%g %y')).toMatch(new RegExp(`^${dirShown} `));
    expect(await statOf(r('outbox/private'), '%a %u:%g')).toBe('2750 4242:4343');
    expect((await d.gitBlob('refs/heads/dirs2:.nas-meta/outbox/private/.nas-meta')).toString()).toMatch(/^mode=42750 uid=4242 gid=4343 /);
    // The name a folder's record has in the Store is no one's to make in a versioned folder.
    expect(await codeOf(fs.mkdir(r('outbox/.nas-meta')))).toBe('EPERM');
    expect(await codeOf(fs.writeFile(r('outbox/private/.nas-meta'), 'x'))).toBe('EPERM');
  });

  it('does not commit a folder again because someone listed it (its access time moved)', async () => {
    expect((await d.nas('branch', 'create', 'demo/listed')).code).toBe(0);
    const q = (rel: string) => d.path('demo@listed', rel);
    const subject = async () => (await d.git('log', '-1', '--format=%s', 'refs/heads/listed')).stdout.trim();
    await fs.mkdir(q('outbox/seen'));
    await fs.writeFile(q('outbox/seen/a.md'), 'a\n');
    await d.sync('demo/listed');
    const before = (await d.gitBlob('refs/heads/listed:.nas-meta/outbox/seen/.nas-meta')).toString();
    // Past the kernel clock's next tick (a few milliseconds), so the listing does move the folder's access time.
    await new Promise((r) => setTimeout(r, 20));
    expect((await run('ls', [q('outbox/seen')])).code).toBe(0);
    await fs.appendFile(q('outbox/seen/a.md'), 'more\n');
    await d.sync('demo/listed');
    expect(await subject()).toBe('nasd: write outbox/seen/a.md');
    expect((await d.gitBlob('refs/heads/listed:.nas-meta/outbox/seen/.nas-meta')).toString()).toBe(before);
  });

  it("merges a file turned into a folder with its records, and proposes a change of a folder's mode alone", async () => {
    // A delete waits for the owner: approved here.
    const propose = async (branch: string) => {
      const r = await d.nas('--json', 'propose', `demo/${branch}`, '--into', 'main', '--intent', `shape ${branch}`);
      expect(r.code, r.stderr).toBe(0);
      const pr = JSON.parse(r.stdout) as { id: number; state: string; changes: { paths: string[] } };
      if (pr.state === 'waiting') expect((await d.nas('pr', 'approve', 'demo', String(pr.id))).stdout).toMatch(/merged/);
      else expect(pr.state, r.stdout).toBe('merged');
      return pr.changes.paths;
    };
    const branch = async (name: string) => {
      expect((await d.nas('branch', 'create', `demo/${name}`)).code).toBe(0);
      return (rel: string) => d.path(`demo@${name}`, rel);
    };
    const a = await branch('shape1');
    await fs.writeFile(a('outbox/shape'), 'a file first\n');
    await propose('shape1');

    const b = await branch('shape2');
    await fs.unlink(b('outbox/shape'));
    await fs.mkdir(b('outbox/shape'));
    await fs.writeFile(b('outbox/shape/inside'), 'now a folder\n');
    await fs.chmod(b('outbox/shape/inside'), 0o640);
    await fs.chmod(b('outbox/shape'), 0o700);
    // The file gone, a folder new in its place: added, not modified.
    expect(await propose('shape2')).toEqual(['A outbox/shape/inside', 'D outbox/shape', 'A outbox/shape/']);
    expect(await statOf(d.path('demo', 'outbox/shape'), '%F %a')).toBe('directory 700');
    expect(await statOf(d.path('demo', 'outbox/shape/inside'), '%a')).toBe('640');

    // Only the folder's mode changes: that is a change to propose, listed as the folder. Bringing the folder
    // up into the branch to chmod it changes no listing: outbox keeps the time it showed.
    const c = await branch('shape3');
    const outboxTime = await statOf(c('outbox'), '%y');
    await fs.chmod(c('outbox/shape'), 0o750);
    expect(await statOf(c('outbox'), '%y')).toBe(outboxTime);
    expect(await propose('shape3')).toEqual(['M outbox/shape/']);
    expect((await d.gitBlob('main:.nas-meta/outbox/shape/.nas-meta')).toString()).toMatch(/^mode=40750 /);
    // main's attributes were looked at above: the merge's answer waited until the mount let go of them.
    expect(await statOf(d.path('demo', 'outbox/shape'), '%a')).toBe('750');
  });
});
