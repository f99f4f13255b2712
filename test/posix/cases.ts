import { randomBytes } from 'node:crypto';
import { absent, fails, names, same, TOOL, type PosixCase } from './case.js';
import type { Sys } from './sys.js';
import { METADATA_CASES } from './cases-metadata.js';
import { SPECIAL_CASES } from './cases-special.js';

/** The cases: files and names here, owners, times and inodes in cases-metadata.ts, special files in cases-special.ts. */

const text = (fs: Sys, p: string) => fs.readFile(p, 'utf8');
const tree = async (dir: string, fs: Sys) => {
  await fs.mkdir(`${dir}/src/lib`, { recursive: true });
  await fs.writeFile(`${dir}/src/README.md`, '# tree\n');
  await fs.writeFile(`${dir}/src/lib/util.ts`, 'export const x = 1;\n');
  await fs.writeFile(`${dir}/src/run.sh`, '#!/bin/sh\necho run\n', { mode: 0o755 });
  await fs.symlink('lib/util.ts', `${dir}/src/entry`);
};

const FILE_CASES: PosixCase[] = [
  {
    name: 'create, write and read a file',
    run: async (d, fs) => {
      await fs.writeFile(`${d}/f.txt`, 'hello\n');
      same(await text(fs, `${d}/f.txt`), 'hello\n', 'content');
    },
  },
  {
    name: 'write at an offset inside a file',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, '0123456789'),
    run: async (d, fs) => {
      const fh = await fs.open(`${d}/f.txt`, 'r+');
      try {
        await fh.write('ab', 3);
      } finally {
        await fh.close();
      }
      same(await text(fs, `${d}/f.txt`), '012ab56789', 'content');
    },
  },
  {
    name: 'append to a file',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'one\n'),
    run: async (d, fs) => {
      await fs.appendFile(`${d}/f.txt`, 'two\n');
      same(await text(fs, `${d}/f.txt`), 'one\ntwo\n', 'content');
    },
  },
  {
    name: 'O_APPEND writes go to the end, whatever position is asked',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'a\n'),
    run: async (d, fs) => {
      const fh = await fs.open(`${d}/f.txt`, 'a');
      try {
        await fh.write('b\n');
        await fh.write(Buffer.from('c\n'), 0);
      } finally {
        await fh.close();
      }
      same(await text(fs, `${d}/f.txt`), 'a\nb\nc\n', 'content');
    },
  },
  {
    name: 'truncate a file shorter, then longer (zero-filled)',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, '0123456789'),
    run: async (d, fs) => {
      await fs.truncate(`${d}/f.txt`, 4);
      same(await text(fs, `${d}/f.txt`), '0123', 'content');
      await fs.truncate(`${d}/f.txt`, 6);
      same(await text(fs, `${d}/f.txt`), '0123\0\0', 'content');
      same((await fs.stat(`${d}/f.txt`)).size, 6, 'size');
    },
  },
  {
    name: 'ftruncate through an open descriptor',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, '0123456789'),
    run: async (d, fs) => {
      const fh = await fs.open(`${d}/f.txt`, 'r+');
      try {
        await fh.truncate(3);
        same((await fh.stat()).size, 3, 'size');
        await fh.write('X', 3);
      } finally {
        await fh.close();
      }
      same(await text(fs, `${d}/f.txt`), '012X', 'content');
    },
  },
  {
    name: 'sed -i rewrites a file (temporary file, then rename over it)',
    mountOnly: TOOL,
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'colour\nkeep\n'),
    run: async (d, fs, { tool }) => {
      await tool('sed', '-i', 's/colour/color/', `${d}/f.txt`);
      same(await text(fs, `${d}/f.txt`), 'color\nkeep\n', 'content');
      same(await names(fs, d), ['f.txt'], 'names');
    },
  },
  {
    name: 'rename a file (mv)',
    mountOnly: TOOL,
    setup: (d, fs) => fs.writeFile(`${d}/a.txt`, 'a\n'),
    run: async (d, fs, { tool }) => {
      await tool('mv', `${d}/a.txt`, `${d}/b.txt`);
      same(await names(fs, d), ['b.txt'], 'names');
      same(await text(fs, `${d}/b.txt`), 'a\n', 'content');
    },
  },
  {
    name: 'rename a file over an existing file',
    setup: async (d, fs) => {
      await fs.writeFile(`${d}/new.txt`, 'new\n');
      await fs.writeFile(`${d}/old.txt`, 'old\n');
    },
    run: async (d, fs) => {
      await fs.rename(`${d}/new.txt`, `${d}/old.txt`);
      same(await names(fs, d), ['old.txt'], 'names');
      same(await text(fs, `${d}/old.txt`), 'new\n', 'content');
    },
  },
  {
    name: 'rename a file onto a directory gives EISDIR, and a directory onto a file ENOTDIR',
    setup: async (d, fs) => {
      await fs.writeFile(`${d}/f.txt`, 'f\n');
      await fs.mkdir(`${d}/dir`);
      await fs.writeFile(`${d}/dir/in.txt`, 'in\n');
    },
    run: async (d, fs) => {
      await fails(fs.rename(`${d}/f.txt`, `${d}/dir`), 'EISDIR');
      await fails(fs.rename(`${d}/dir`, `${d}/f.txt`), 'ENOTDIR');
      same(await names(fs, d), ['dir', 'f.txt'], 'names');
    },
    expect: { main: 'OK' },
    why: 'the kernel answers EISDIR and ENOTDIR from the types of the two names before it asks the filesystem',
  },
  {
    name: 'rename a directory with what it holds',
    setup: async (d, fs) => {
      await fs.mkdir(`${d}/d1/sub`, { recursive: true });
      await fs.writeFile(`${d}/d1/sub/f.txt`, 'deep\n');
    },
    run: async (d, fs) => {
      await fs.rename(`${d}/d1`, `${d}/d2`);
      same(await names(fs, d), ['d2'], 'names');
      same(await text(fs, `${d}/d2/sub/f.txt`), 'deep\n', 'content');
    },
  },
  {
    name: 'rename a directory over an empty directory',
    setup: async (d, fs) => {
      await fs.mkdir(`${d}/d1`);
      await fs.writeFile(`${d}/d1/f.txt`, 'f\n');
      await fs.mkdir(`${d}/empty`);
    },
    run: async (d, fs) => {
      await fs.rename(`${d}/d1`, `${d}/empty`);
      same(await names(fs, d), ['empty'], 'names');
      same(await names(fs, `${d}/empty`), ['f.txt'], 'names');
    },
  },
  {
    name: 'rename a directory onto a non-empty directory gives ENOTEMPTY',
    setup: async (d, fs) => {
      await fs.mkdir(`${d}/d1`);
      await fs.writeFile(`${d}/d1/a.txt`, 'a\n');
      await fs.mkdir(`${d}/d2`);
      await fs.writeFile(`${d}/d2/b.txt`, 'b\n');
    },
    run: async (d, fs) => {
      await fails(fs.rename(`${d}/d1`, `${d}/d2`), 'ENOTEMPTY');
      same([await names(fs, `${d}/d1`), await names(fs, `${d}/d2`)], [['a.txt'], ['b.txt']], 'names');
    },
  },
  {
    name: 'unlink a file',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'f\n'),
    run: async (d, fs) => {
      await fs.unlink(`${d}/f.txt`);
      await fails(fs.stat(`${d}/f.txt`), 'ENOENT');
      same(await names(fs, d), [], 'names');
    },
  },
  {
    name: 'rmdir: a non-empty directory gives ENOTEMPTY, an empty one goes',
    setup: async (d, fs) => {
      await fs.mkdir(`${d}/full`);
      await fs.writeFile(`${d}/full/f.txt`, 'f\n');
      await fs.mkdir(`${d}/empty`);
    },
    run: async (d, fs) => {
      await fails(fs.rmdir(`${d}/full`), 'ENOTEMPTY');
      await fs.rmdir(`${d}/empty`);
      same(await names(fs, d), ['full'], 'names');
    },
  },
  {
    name: 'mkdir on an existing name gives EEXIST',
    setup: async (d, fs) => {
      await fs.mkdir(`${d}/dir`);
      await fs.writeFile(`${d}/dir/f.txt`, 'f\n');
      await fs.writeFile(`${d}/f.txt`, 'f\n');
    },
    run: async (d, fs) => {
      await fails(fs.mkdir(`${d}/dir`), 'EEXIST');
      await fails(fs.mkdir(`${d}/f.txt`), 'EEXIST');
    },
    expect: { main: 'OK' },
    why: 'the kernel answers EEXIST for an existing name before it asks the filesystem, as on any read-only mount',
  },
  {
    name: 'open with O_CREAT|O_EXCL on an existing file gives EEXIST',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'f\n'),
    run: async (d, fs) => {
      await fails(fs.open(`${d}/f.txt`, 'wx'), 'EEXIST');
      same(await text(fs, `${d}/f.txt`), 'f\n', 'content');
    },
    expect: { main: 'OK' },
    why: 'the kernel answers EEXIST for an existing name before it asks the filesystem, as on any read-only mount',
  },
  {
    name: 'symlink (ln -s) and readlink',
    mountOnly: TOOL,
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'target\n'),
    run: async (d, fs, { tool }) => {
      await tool('ln', '-s', 'f.txt', `${d}/link`);
      same(await fs.readlink(`${d}/link`), 'f.txt', 'readlink');
      same((await fs.lstat(`${d}/link`)).isSymbolicLink(), true, 'lstat');
      same(await text(fs, `${d}/link`), 'target\n', 'content');
    },
  },
  {
    name: 'symlink and readlink, by syscall: a link is followed, lstat sees the link itself',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'target\n'),
    run: async (d, fs) => {
      await fs.symlink('f.txt', `${d}/link`);
      await fs.symlink('missing', `${d}/dangling`);
      same([await fs.readlink(`${d}/link`), await fs.readlink(`${d}/dangling`)], ['f.txt', 'missing'], 'readlink');
      same([(await fs.lstat(`${d}/link`)).isSymbolicLink(), (await fs.stat(`${d}/link`)).isFile()], [true, true], 'lstat');
      same(await text(fs, `${d}/link`), 'target\n', 'content');
      await fails(fs.stat(`${d}/dangling`), 'ENOENT');
      await fails(fs.symlink('f.txt', `${d}/link`), 'EEXIST');
    },
  },
  {
    name: 'hard link: both names show the same file',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'one\n'),
    run: async (d, fs) => {
      await fs.link(`${d}/f.txt`, `${d}/g.txt`);
      await fs.appendFile(`${d}/g.txt`, 'two\n');
      same(await text(fs, `${d}/f.txt`), 'one\ntwo\n', 'content');
      same((await fs.stat(`${d}/f.txt`)).nlink, 2, 'nlink');
      same((await fs.stat(`${d}/g.txt`)).ino, (await fs.stat(`${d}/f.txt`)).ino, 'ino');
    },
    expect: { versioned: 'EPERM' },
    why: 'git trees cannot hold hard links: refused in versioned folders, allowed in scratch (workspace/ and ignored paths)',
    afterRefusal: async (d, fs) => {
      await absent(fs, `${d}/g.txt`);
      same((await fs.stat(`${d}/f.txt`)).nlink, 1, 'nlink');
    },
  },
  {
    name: 'chmod +x is kept',
    mountOnly: TOOL,
    setup: (d, fs) => fs.writeFile(`${d}/run.sh`, '#!/bin/sh\necho ok\n', { mode: 0o644 }),
    run: async (d, fs, { tool }) => {
      await tool('chmod', '+x', `${d}/run.sh`);
      same((await fs.stat(`${d}/run.sh`)).mode & 0o777, 0o755, 'mode');
      same((await tool(`${d}/run.sh`)).trim(), 'ok', 'exec');
    },
  },
  {
    name: 'readdir lists what was created, with its type',
    run: async (d, fs) => {
      await fs.writeFile(`${d}/a.txt`, 'a');
      await fs.mkdir(`${d}/b`);
      await fs.symlink('a.txt', `${d}/c`);
      const entries = (await fs.readdir(d, { withFileTypes: true })).map((e) => `${e.name}:${e.isFile() ? 'f' : e.isDirectory() ? 'd' : e.isSymbolicLink() ? 'l' : '?'}`);
      same(entries.sort(), ['a.txt:f', 'b:d', 'c:l'], 'entries');
    },
  },
  {
    name: 'readdir shows . and .. (ls -a)',
    mountOnly: TOOL,
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'f'),
    mutates: false,
    run: async (d, fs, { tool }) => {
      const listed = (await tool('ls', '-a1', d)).split('\n').filter((n) => n && n !== '.keep');
      same(listed.sort(), ['.', '..', 'f.txt'], 'dot-entries');
    },
  },
  {
    name: 'stat reports sizes and kinds',
    run: async (d, fs) => {
      await fs.writeFile(`${d}/empty`, '');
      await fs.writeFile(`${d}/one`, 'x');
      await fs.writeFile(`${d}/page`, Buffer.alloc(4097, 7));
      await fs.mkdir(`${d}/dir`);
      const st = async (n: string) => fs.stat(`${d}/${n}`);
      same([(await st('empty')).size, (await st('one')).size, (await st('page')).size], [0, 1, 4097], 'size');
      same([(await st('page')).isFile(), (await st('dir')).isDirectory()], [true, true], 'kind');
    },
  },
  {
    name: 'names of 255 bytes, and paths near PATH_MAX',
    run: async (d, fs) => {
      const long = 'n'.repeat(255);
      await fs.writeFile(`${d}/${long}`, 'long name\n');
      same(await text(fs, `${d}/${long}`), 'long name\n', 'content');
      await fails(fs.writeFile(`${d}/${long}x`, 'x'), 'ENAMETOOLONG');
      // Directories of 200-byte names until the path is a few bytes short of PATH_MAX (4096 with its NUL).
      let dir = d;
      while (dir.length + 201 + 10 < 4095) {
        dir = `${dir}/${'d'.repeat(200)}`;
        await fs.mkdir(dir);
      }
      const file = `${dir}/${'f'.repeat(4094 - dir.length - 1)}`;
      same(file.length, 4094, 'length');
      await fs.writeFile(file, 'at the limit\n');
      same(await text(fs, file), 'at the limit\n', 'content');
      await fs.rename(file, `${file.slice(0, -1)}g`);
      same(await text(fs, `${file.slice(0, -1)}g`), 'at the limit\n', 'content');
    },
  },
  {
    name: 'deep paths (mkdir -p a/b/c/d)',
    mountOnly: TOOL,
    run: async (d, fs, { tool }) => {
      await tool('mkdir', '-p', `${d}/a/b/c/d`);
      await fs.writeFile(`${d}/a/b/c/d/e.txt`, 'deep\n');
      same(await text(fs, `${d}/a/b/c/d/e.txt`), 'deep\n', 'content');
      same(await names(fs, `${d}/a/b/c`), ['d'], 'names');
    },
  },
  {
    name: 'deep paths, by syscall (mkdir at each level)',
    run: async (d, fs) => {
      for (const p of ['a', 'a/b', 'a/b/c', 'a/b/c/d']) await fs.mkdir(`${d}/${p}`);
      await fails(fs.mkdir(`${d}/a/b`), 'EEXIST');
      await fs.writeFile(`${d}/a/b/c/d/e.txt`, 'deep\n');
      same(await text(fs, `${d}/a/b/c/d/e.txt`), 'deep\n', 'content');
      same(await names(fs, `${d}/a/b/c`), ['d'], 'names');
      await fails(fs.writeFile(`${d}/a/b/x/e.txt`, 'no\n'), 'ENOENT');
      await fails(fs.mkdir(`${d}/a/b/c/d/e.txt/f`), 'ENOTDIR');
    },
  },
  {
    name: 'a 1 MiB file round trip, whole and at an offset',
    run: async (d, fs) => {
      const data = randomBytes(1 << 20);
      await fs.writeFile(`${d}/big.bin`, data);
      same((await fs.readFile(`${d}/big.bin`)).equals(data), true, 'content');
      const fh = await fs.open(`${d}/big.bin`, 'r');
      try {
        const part = Buffer.alloc(1000);
        await fh.read(part, 0, 1000, 700_000);
        same(part.equals(data.subarray(700_000, 701_000)), true, 'content');
      } finally {
        await fh.close();
      }
    },
  },
  {
    name: 'an unlinked file stays readable through a descriptor opened before',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'still here\n'),
    run: async (d, fs) => {
      const fh = await fs.open(`${d}/f.txt`, 'r');
      try {
        await fs.unlink(`${d}/f.txt`);
        await fails(fs.stat(`${d}/f.txt`), 'ENOENT');
        const buf = Buffer.alloc(64);
        const { bytesRead } = await fh.read(buf, 0, 64, 0);
        same(buf.subarray(0, bytesRead).toString(), 'still here\n', 'content');
        same(await names(fs, d), [], 'names-while-open');
      } finally {
        await fh.close();
      }
      same(await names(fs, d), [], 'names');
    },
  },
  {
    name: 'cp -r copies a tree, mode and symlink included',
    mountOnly: TOOL,
    setup: (d, fs) => tree(d, fs),
    run: async (d, fs, { tool }) => {
      await tool('cp', '-r', `${d}/src`, `${d}/copy`);
      await tool('diff', '-r', `${d}/src`, `${d}/copy`);
      same((await fs.stat(`${d}/copy/run.sh`)).mode & 0o111, 0o111, 'mode');
      same(await fs.readlink(`${d}/copy/entry`), 'lib/util.ts', 'readlink');
    },
  },
  {
    name: 'tar c and tar x round trip',
    mountOnly: TOOL,
    setup: (d, fs) => tree(d, fs),
    run: async (d, fs, { tool }) => {
      await tool('tar', '-cf', `${d}/t.tar`, '-C', d, 'src');
      await fs.mkdir(`${d}/out`);
      await tool('tar', '-xf', `${d}/t.tar`, '-C', `${d}/out`);
      await tool('diff', '-r', `${d}/src`, `${d}/out/src`);
    },
  },
  {
    name: 'mkfifo makes a named pipe',
    mountOnly: TOOL,
    run: async (d, fs, { tool }) => {
      await tool('mkfifo', `${d}/pipe`);
      same((await fs.stat(`${d}/pipe`)).isFIFO(), true, 'kind');
    },
    expect: { versioned: 'EPERM' },
    why: 'git cannot hold a FIFO: special files live in scratch (workspace/, ignored paths)',
    afterRefusal: (d, fs) => absent(fs, `${d}/pipe`),
  },
  {
    name: 'utimes sets atime and mtime separately',
    setup: (d, fs) => fs.writeFile(`${d}/f.txt`, 'f'),
    run: async (d, fs) => {
      await fs.utimes(`${d}/f.txt`, 1_000_000, 2_000_000);
      const st = await fs.stat(`${d}/f.txt`);
      same([Math.round(st.atimeMs / 1000), Math.round(st.mtimeMs / 1000)], [1_000_000, 2_000_000], 'times');
    },
  },
  {
    name: 'a write moves mtime forward',
    setup: async (d, fs) => {
      await fs.writeFile(`${d}/f.txt`, 'f');
    },
    run: async (d, fs) => {
      await fs.utimes(`${d}/f.txt`, 1_000_000, 1_000_000);
      await fs.appendFile(`${d}/f.txt`, 'more');
      same((await fs.stat(`${d}/f.txt`)).mtimeMs > 1_000_000_000, true, 'mtime');
    },
  },
];

export const CASES: PosixCase[] = [...FILE_CASES, ...METADATA_CASES, ...SPECIAL_CASES];
