import { absent, matches, same, TOOL, type PosixCase } from './case.js';
import type { SysStats } from './sys.js';

/**
 * Owners, modes, times and inode numbers as a disk keeps them. The users: 65534 (nobody) holds a write lease
 * on the branch the mount targets use (without one nasd refuses a user whatever the modes say); 4343 holds
 * none and owns nothing.
 */

const owner = (st: SysStats) => `${st.uid}:${st.gid}`;
const near = (ms: number) => Math.abs(ms - Date.now()) < 60_000;
/** Why a case that needs the kernel's permission checks cannot run in process. */
const PERMISSIONS = 'the kernel checks modes and owners (default_permissions) before it asks a filesystem: a view called directly checks none';
const HARD_LINKS = 'git trees cannot hold hard links: refused in versioned folders, allowed in scratch (workspace/ and ignored paths)';

export const METADATA_CASES: PosixCase[] = [
  {
    name: 'a new file and directory belong to the user who made them',
    run: async (d, fs, { as }) => {
      await fs.mkdir(`${d}/shared`, { mode: 0o777 });
      await fs.chmod(`${d}/shared`, 0o777);
      same((await fs.stat(`${d}/shared`)).mode & 0o777, 0o777, 'mode');
      const nobody = as(65534, 65534);
      await nobody.writeFile(`${d}/shared/theirs.txt`, 'hi\n');
      await nobody.mkdir(`${d}/shared/theirs.d`);
      same(owner(await fs.stat(`${d}/shared/theirs.txt`)), '65534:65534', 'owner');
      same(owner(await fs.stat(`${d}/shared/theirs.d`)), '65534:65534', 'owner');
      same(await nobody.readdir(`${d}/shared`).then((n) => n.sort()), ['theirs.d', 'theirs.txt'], 'names');
    },
  },
  {
    name: 'chown gives a file to another user and group; -1 leaves one as it is',
    setup: (d, fs) => fs.writeFile(`${d}/given.txt`, 'one\n'),
    run: async (d, fs) => {
      await fs.chown(`${d}/given.txt`, 4242, 4343);
      same(owner(await fs.stat(`${d}/given.txt`)), '4242:4343', 'owner');
      await fs.chown(`${d}/given.txt`, -1, 4444);
      same(owner(await fs.stat(`${d}/given.txt`)), '4242:4444', 'owner');
    },
  },
  {
    name: "a file's new owner may write it, another user may not",
    mountOnly: PERMISSIONS,
    run: async (d, fs, { as }) => {
      await fs.writeFile(`${d}/given.txt`, 'one\n');
      await fs.chown(`${d}/given.txt`, 65534, 65534);
      same(owner(await fs.stat(`${d}/given.txt`)), '65534:65534', 'owner');
      await as(65534, 65534).appendFile(`${d}/given.txt`, 'two\n');
      const other = await as(4343, 4343).appendFile(`${d}/given.txt`, 'three\n').then(() => 'OK', (e: NodeJS.ErrnoException) => e.code);
      same(other, 'EACCES', 'other-user');
      same(await fs.readFile(`${d}/given.txt`, 'utf8'), 'one\ntwo\n', 'content');
    },
  },
  {
    name: 'a setgid directory gives its group to what is made in it, and its setgid bit to a directory',
    run: async (d, fs, { as }) => {
      await fs.mkdir(`${d}/team`);
      await fs.chown(`${d}/team`, 0, 4444);
      await fs.chmod(`${d}/team`, 0o2777);
      same((await fs.stat(`${d}/team`)).mode & 0o7777, 0o2777, 'mode');
      const nobody = as(65534, 65534);
      await nobody.writeFile(`${d}/team/f`, '');
      await nobody.mkdir(`${d}/team/sub`);
      same(owner(await fs.stat(`${d}/team/f`)), '65534:4444', 'group');
      const sub = await fs.stat(`${d}/team/sub`);
      same([owner(sub), sub.mode & 0o2000], ['65534:4444', 0o2000], 'setgid-directory');
    },
  },
  {
    name: 'lchown changes a symbolic link itself, not what it points to',
    setup: async (d, fs) => {
      await fs.writeFile(`${d}/key`, 'k\n');
      await fs.symlink('key', `${d}/link`);
    },
    run: async (d, fs) => {
      const target = owner(await fs.stat(`${d}/key`));
      await fs.lchown(`${d}/link`, 4242, 4343);
      same(owner(await fs.lstat(`${d}/link`)), '4242:4343', 'owner');
      same(owner(await fs.stat(`${d}/key`)), target, 'target-owner');
    },
  },
  {
    name: 'chmod keeps every mode as set, setuid, setgid and sticky bits included',
    setup: async (d, fs) => {
      await fs.writeFile(`${d}/f`, 'x');
      await fs.mkdir(`${d}/dir`);
    },
    run: async (d, fs) => {
      const modes = [0o600, 0o640, 0o644, 0o700, 0o755, 0o444, 0o4755, 0o2755, 0o1777];
      const got: number[] = [];
      for (const m of modes) {
        await fs.chmod(`${d}/f`, m);
        got.push((await fs.stat(`${d}/f`)).mode & 0o7777);
      }
      same(got, modes, 'mode');
      await fs.chmod(`${d}/dir`, 0o2750);
      same((await fs.stat(`${d}/dir`)).mode & 0o7777, 0o2750, 'mode');
      await fs.chmod(`${d}/dir`, 0o1777);
      same((await fs.stat(`${d}/dir`)).mode & 0o7777, 0o1777, 'mode');
    },
  },
  {
    name: 'touch sets modification and access times separately, with now and omit, to the nanosecond',
    mountOnly: TOOL,
    run: async (d, fs, { tool }) => {
      const f = `${d}/times.txt`;
      await fs.writeFile(f, 't');
      await tool('touch', '-m', '-d', '2001-02-03 04:05:06.123456789', f);
      await tool('touch', '-a', '-d', '2002-03-04 05:06:07.5', f);
      matches(await tool('stat', '-c', '%y', f), /^2001-02-03 04:05:06\.123456789 /, 'mtime');
      matches(await tool('stat', '-c', '%x', f), /^2002-03-04 05:06:07\.5/, 'atime');
      // touch -m with no date: mtime now, atime left alone.
      await tool('touch', '-m', f);
      matches(await tool('stat', '-c', '%x', f), /^2002-03-04 05:06:07\.5/, 'atime');
      same(near((await fs.stat(f)).mtimeMs), true, 'mtime-now');
    },
  },
  {
    name: 'utimensat sets one time and leaves the other (UTIME_OMIT), to the nanosecond, or to now (UTIME_NOW)',
    setup: (d, fs) => fs.writeFile(`${d}/times.txt`, 't'),
    run: async (d, fs) => {
      const f = `${d}/times.txt`;
      await fs.lutimens(f, 'omit', { sec: 981173106, nsec: 123456789 });
      await fs.lutimens(f, { sec: 1015218367, nsec: 500000000 }, 'omit');
      let st = await fs.stat(f);
      same([st.mtimeNs, st.atimeNs], [981173106123456789n, 1015218367500000000n], 'times');
      await fs.lutimens(f, 'omit', 'now');
      st = await fs.stat(f);
      same(st.atimeNs, 1015218367500000000n, 'atime');
      same(near(st.mtimeMs), true, 'mtime-now');
      const mtime = st.mtimeNs;
      await fs.lutimens(f, 'now', 'omit');
      st = await fs.stat(f);
      same([near(st.atimeMs), st.mtimeNs], [true, mtime], 'atime-now');
    },
  },
  {
    name: "a symbolic link's own times (AT_SYMLINK_NOFOLLOW) leave its target's alone",
    setup: async (d, fs) => {
      await fs.writeFile(`${d}/key`, 'k\n');
      await fs.symlink('key', `${d}/link`);
    },
    run: async (d, fs) => {
      const target = (await fs.stat(`${d}/key`)).mtimeNs;
      await fs.lutimens(`${d}/link`, { sec: 1049522828, nsec: 987654321 }, { sec: 1049522828, nsec: 987654321 });
      same((await fs.lstat(`${d}/link`)).mtimeNs, 1049522828987654321n, 'mtime');
      same((await fs.stat(`${d}/key`)).mtimeNs, target, 'target-mtime');
    },
  },
  {
    name: 'an inode number stays the same from lookup to lookup, also once the kernel dropped its caches; each file has its own',
    setup: async (d, fs) => {
      await fs.writeFile(`${d}/a.txt`, 'a');
      await fs.writeFile(`${d}/b.txt`, 'b');
      await fs.mkdir(`${d}/dir`);
      await fs.writeFile(`${d}/dir/c.txt`, 'c');
    },
    mutates: false,
    run: async (d, fs, { dropCaches }) => {
      const inos = async () => Promise.all(['a.txt', 'b.txt', 'dir', 'dir/c.txt'].map(async (n) => (await fs.stat(`${d}/${n}`)).ino));
      const before = await inos();
      same(await inos(), before, 'ino');
      await dropCaches();
      same(await inos(), before, 'ino');
      same(new Set(before).size, before.length, 'distinct-ino');
    },
  },
  {
    name: 'a rename keeps the inode number',
    setup: async (d, fs) => {
      await fs.writeFile(`${d}/a.txt`, 'a');
      await fs.mkdir(`${d}/dir`);
      await fs.writeFile(`${d}/dir/c.txt`, 'c');
    },
    run: async (d, fs) => {
      const before = [(await fs.stat(`${d}/a.txt`)).ino, (await fs.stat(`${d}/dir`)).ino];
      await fs.rename(`${d}/a.txt`, `${d}/b.txt`);
      await fs.rename(`${d}/dir`, `${d}/moved`);
      same([(await fs.stat(`${d}/b.txt`)).ino, (await fs.stat(`${d}/moved`)).ino], before, 'ino');
    },
  },
  {
    name: 'hard links are one inode: find -samefile lists both names',
    mountOnly: TOOL,
    setup: (d, fs) => fs.writeFile(`${d}/one`, '1'),
    run: async (d, fs, { tool }) => {
      await fs.link(`${d}/one`, `${d}/two`);
      const [a, b] = [await fs.stat(`${d}/one`), await fs.stat(`${d}/two`)];
      same(a.ino, b.ino, 'ino');
      same(a.nlink, 2, 'nlink');
      same((await tool('find', d, '-samefile', `${d}/one`)).trim().split('\n').sort(), [`${d}/one`, `${d}/two`], 'samefile');
    },
    expect: { versioned: 'EPERM' },
    why: HARD_LINKS,
    afterRefusal: (d, fs) => absent(fs, `${d}/two`),
  },
];
