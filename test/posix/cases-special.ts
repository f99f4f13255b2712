import { lstat } from 'node:fs/promises';
import { constants } from 'node:fs';
import { absent, names, same, type PosixCase } from './case.js';

/**
 * What git cannot hold: FIFOs, unix sockets, device nodes, nested repositories. In scratch (workspace/, and
 * what a .gitignore ignores) they work as on a disk; a versioned folder refuses them with EPERM and leaves
 * nothing behind.
 */

const SPECIAL = 'git cannot hold a FIFO, a socket or a device node: special files live in scratch (workspace/, ignored paths)';
const { S_IFIFO, S_IFSOCK, S_IFCHR } = constants;
/** makedev(1, 3): /dev/null's numbers, as `mknod c 1 3` gives them. */
const NULL_DEVICE = (1 << 8) | 3;

export const SPECIAL_CASES: PosixCase[] = [
  {
    name: 'a FIFO carries data between two processes',
    mountOnly: 'a FIFO joins two processes in the kernel: they open it by a path in a mounted filesystem',
    run: async (d, fs, { tool }) => {
      await fs.mkdir(`${d}/run`);
      const fifo = `${d}/run/pipe`;
      await tool('mkfifo', fifo);
      same((await fs.lstat(fifo)).isFIFO(), true, 'kind');
      // A reader and a writer meet in the kernel: the data never passes through nasd. Each gives up after 10 s.
      const [read] = await Promise.all([tool('timeout', '10', 'cat', fifo), tool('timeout', '10', 'sh', '-c', `printf 'through the pipe' > '${fifo}'`)]);
      same(read, 'through the pipe', 'content');
    },
    expect: { versioned: 'EPERM' },
    why: SPECIAL,
    afterRefusal: (d, fs) => absent(fs, `${d}/run/pipe`),
  },
  {
    name: 'a unix socket serves a client, as language servers and ssh-agent do',
    mountOnly: 'bind(2) makes a socket at a path in a mounted filesystem, and connect(2) finds it there',
    run: async (d, _fs, { tool }) => {
      const script = [
        'import socket, sys, os',
        // A socket's path is at most 108 bytes: bound relative to its directory.
        `os.chdir(${JSON.stringify(d)})`,
        'path = "agent.sock"',
        's = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(1)',
        'c = socket.socket(socket.AF_UNIX); c.connect(path); c.sendall(b"hello over unix")',
        'conn, _ = s.accept(); sys.stdout.write(conn.recv(100).decode())',
        'sys.stdout.write(" " + str(__import__("stat").S_ISSOCK(os.lstat(path).st_mode)))',
      ].join('\n');
      same(await tool('python3', '-c', script), 'hello over unix True', 'socket');
    },
    expect: { versioned: 'EPERM' },
    why: SPECIAL,
    afterRefusal: (d, fs) => absent(fs, `${d}/agent.sock`),
  },
  {
    name: 'mknod makes a FIFO and a socket inode (what mkfifo and bind ask for)',
    run: async (d, fs) => {
      await fs.mknod(`${d}/fifo`, S_IFIFO | 0o644, 0);
      await fs.mknod(`${d}/sock`, S_IFSOCK | 0o755, 0);
      same([(await fs.lstat(`${d}/fifo`)).isFIFO(), (await fs.lstat(`${d}/sock`)).isSocket()], [true, true], 'kind');
      same(await names(fs, d), ['fifo', 'sock'], 'names');
      await fs.unlink(`${d}/fifo`);
      await fs.unlink(`${d}/sock`);
      same(await names(fs, d), [], 'names');
    },
    expect: { versioned: 'EPERM' },
    why: SPECIAL,
    afterRefusal: async (d, fs) => {
      await absent(fs, `${d}/fifo`);
      await absent(fs, `${d}/sock`);
    },
  },
  {
    name: 'root makes a device node (mknod c 1 3) with the numbers asked',
    run: async (d, fs) => {
      const dev = `${d}/null`;
      await fs.mknod(dev, S_IFCHR | 0o666, NULL_DEVICE);
      const st = await fs.lstat(dev);
      same(st.isCharacterDevice(), true, 'kind');
      same(st.rdev, Number((await lstat('/dev/null', { bigint: true })).rdev), 'rdev');
      await fs.unlink(dev);
      await absent(fs, dev);
    },
    expect: { versioned: 'EPERM' },
    why: SPECIAL,
    afterRefusal: (d, fs) => absent(fs, `${d}/null`),
  },
  {
    name: 'a device node opens as the device it copies',
    mountOnly: 'nodev is the kernel\'s refusal at open: in process nothing opens a device',
    run: async (d, fs) => {
      const dev = `${d}/null`;
      await fs.mknod(dev, S_IFCHR | 0o666, NULL_DEVICE);
      try {
        await fs.writeFile(dev, 'swallowed');
        same((await fs.lstat(dev)).size, 0, 'size');
      } finally {
        await fs.unlink(dev);
      }
    },
    expect: { versioned: 'EPERM', workspace: 'EACCES', ignored: 'EACCES' },
    why: `${SPECIAL}; and the mount is nodev,nosuid (as its workspace/ binds): a device node in a Home never opens as the device`,
    afterRefusal: (d, fs) => absent(fs, `${d}/null`),
  },
  {
    name: 'a nested repository: a directory named .git',
    run: async (d, fs) => {
      await fs.mkdir(`${d}/dep`);
      await fs.mkdir(`${d}/dep/.git`);
      await fs.writeFile(`${d}/dep/.git/HEAD`, 'ref: refs/heads/main\n');
      same(await names(fs, `${d}/dep`), ['.git'], 'names');
      same(await fs.readFile(`${d}/dep/.git/HEAD`, 'utf8'), 'ref: refs/heads/main\n', 'content');
    },
    expect: { versioned: 'EPERM' },
    why: 'git commits no .git directory: in a versioned folder the name is refused; scratch holds nested repositories (a dependency checked out by a tool)',
    afterRefusal: (d, fs) => absent(fs, `${d}/dep/.git`),
  },
];
