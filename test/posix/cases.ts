import fs from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { run } from '../helpers.js';

/**
 * One list of POSIX cases, each run in a fresh directory of every target: a native directory (the
 * baseline), a branch view's versioned folder, its workspace/ (scratch), and main (read-only).
 *
 * A case's outcome is 'OK', an errno code (from a syscall, or read from a tool's message), or the name
 * of a check that did not hold (`same(..., 'content')`). The native directory must give 'OK'. Where a view
 * gives something else, the case says so in `expect` with the reason in `why`, and `gap: true` marks a
 * difference that is today's behaviour rather than an intended one: the table of differences is this file.
 */

export type Target = 'native' | 'versioned' | 'workspace' | 'main';

export interface PosixCase {
  name: string;
  /** Fixtures, made with plain syscalls before the case runs (for main: pushed with git by the owner). */
  setup?: (dir: string) => Promise<void>;
  /** The operations under test and their checks; throws to report an outcome other than 'OK'. */
  run: (dir: string) => Promise<void>;
  /** false for a case that only reads: on main it must then behave as natively. Default: true (main gives EROFS). */
  mutates?: boolean;
  /** The outcome where a target differs from native. */
  expect?: Partial<Record<Target, string>>;
  /** Why it differs: required with `expect`. */
  why?: string;
  /** The difference is a known gap (today's behaviour, not a design decision). */
  gap?: boolean;
}

/** A check that did not hold: its code names what differed. */
export class Differs extends Error {
  constructor(readonly code: string, detail: string) {
    super(`${code}: ${detail}`);
  }
}

function same(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) throw new Differs(what, `got ${JSON.stringify(actual)}, native gives ${JSON.stringify(expected)}`);
}

/** The syscall must fail with `code`; any other failure is the outcome. */
async function fails(p: Promise<unknown>, code: string): Promise<void> {
  try {
    await p;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === code) return;
    throw e;
  }
  throw new Differs(`no-${code}`, `succeeded where native gives ${code}`);
}

const MESSAGES: Record<string, string> = {
  'Read-only file system': 'EROFS', 'Operation not permitted': 'EPERM', 'File exists': 'EEXIST', 'Directory not empty': 'ENOTEMPTY',
  'No such file or directory': 'ENOENT', 'Permission denied': 'EACCES', 'Disk quota exceeded': 'EDQUOT', 'Operation not supported': 'ENOTSUP',
  'Invalid cross-device link': 'EXDEV', 'Is a directory': 'EISDIR', 'Not a directory': 'ENOTDIR',
};

/** Run a real tool; a failure becomes the errno its message names. */
async function tool(cmd: string, ...args: string[]): Promise<string> {
  const r = await run(cmd, args);
  if (r.code === 0) return r.stdout;
  const known = Object.entries(MESSAGES).find(([text]) => r.stderr.includes(text));
  if (known) throw Object.assign(new Error(`${cmd}: ${r.stderr.trim()}`), { code: known[1] });
  throw new Differs(`${cmd}-failed`, r.stderr.trim());
}

const text = (p: string) => fs.readFile(p, 'utf8');
/** A directory's names; `.keep` is how main's fixtures keep a directory in git, not part of a case. */
const names = async (dir: string) => (await fs.readdir(dir)).filter((n) => n !== '.keep').sort();
const tree = async (dir: string) => {
  await fs.mkdir(`${dir}/src/lib`, { recursive: true });
  await fs.writeFile(`${dir}/src/README.md`, '# tree\n');
  await fs.writeFile(`${dir}/src/lib/util.ts`, 'export const x = 1;\n');
  await fs.writeFile(`${dir}/src/run.sh`, '#!/bin/sh\necho run\n', { mode: 0o755 });
  await fs.symlink('lib/util.ts', `${dir}/src/entry`);
};

export const CASES: PosixCase[] = [
  {
    name: 'create, write and read a file',
    run: async (d) => {
      await fs.writeFile(`${d}/f.txt`, 'hello\n');
      same(await text(`${d}/f.txt`), 'hello\n', 'content');
    },
  },
  {
    name: 'write at an offset inside a file',
    setup: (d) => fs.writeFile(`${d}/f.txt`, '0123456789'),
    run: async (d) => {
      const fh = await fs.open(`${d}/f.txt`, 'r+');
      try {
        await fh.write('ab', 3);
      } finally {
        await fh.close();
      }
      same(await text(`${d}/f.txt`), '012ab56789', 'content');
    },
  },
  {
    name: 'append to a file',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'one\n'),
    run: async (d) => {
      await fs.appendFile(`${d}/f.txt`, 'two\n');
      same(await text(`${d}/f.txt`), 'one\ntwo\n', 'content');
    },
  },
  {
    name: 'O_APPEND writes go to the end, whatever position is asked',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'a\n'),
    run: async (d) => {
      const fh = await fs.open(`${d}/f.txt`, 'a');
      try {
        await fh.write('b\n');
        await fh.write(Buffer.from('c\n'), 0, 2, 0);
      } finally {
        await fh.close();
      }
      same(await text(`${d}/f.txt`), 'a\nb\nc\n', 'content');
    },
  },
  {
    name: 'truncate a file shorter, then longer (zero-filled)',
    setup: (d) => fs.writeFile(`${d}/f.txt`, '0123456789'),
    run: async (d) => {
      await fs.truncate(`${d}/f.txt`, 4);
      same(await text(`${d}/f.txt`), '0123', 'content');
      await fs.truncate(`${d}/f.txt`, 6);
      same(await text(`${d}/f.txt`), '0123\0\0', 'content');
      same((await fs.stat(`${d}/f.txt`)).size, 6, 'size');
    },
  },
  {
    name: 'ftruncate through an open descriptor',
    setup: (d) => fs.writeFile(`${d}/f.txt`, '0123456789'),
    run: async (d) => {
      const fh = await fs.open(`${d}/f.txt`, 'r+');
      try {
        await fh.truncate(3);
        same((await fh.stat()).size, 3, 'size');
        await fh.write('X', 3);
      } finally {
        await fh.close();
      }
      same(await text(`${d}/f.txt`), '012X', 'content');
    },
  },
  {
    name: 'sed -i rewrites a file (temporary file, then rename over it)',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'colour\nkeep\n'),
    run: async (d) => {
      await tool('sed', '-i', 's/colour/color/', `${d}/f.txt`);
      same(await text(`${d}/f.txt`), 'color\nkeep\n', 'content');
      same(await names(d), ['f.txt'], 'names');
    },
  },
  {
    name: 'rename a file (mv)',
    setup: (d) => fs.writeFile(`${d}/a.txt`, 'a\n'),
    run: async (d) => {
      await tool('mv', `${d}/a.txt`, `${d}/b.txt`);
      same(await names(d), ['b.txt'], 'names');
      same(await text(`${d}/b.txt`), 'a\n', 'content');
    },
  },
  {
    name: 'rename a file over an existing file',
    setup: async (d) => {
      await fs.writeFile(`${d}/new.txt`, 'new\n');
      await fs.writeFile(`${d}/old.txt`, 'old\n');
    },
    run: async (d) => {
      await fs.rename(`${d}/new.txt`, `${d}/old.txt`);
      same(await names(d), ['old.txt'], 'names');
      same(await text(`${d}/old.txt`), 'new\n', 'content');
    },
  },
  {
    name: 'rename a file onto a directory gives EISDIR, and a directory onto a file ENOTDIR',
    setup: async (d) => {
      await fs.writeFile(`${d}/f.txt`, 'f\n');
      await fs.mkdir(`${d}/dir`);
      await fs.writeFile(`${d}/dir/in.txt`, 'in\n');
    },
    run: async (d) => {
      await fails(fs.rename(`${d}/f.txt`, `${d}/dir`), 'EISDIR');
      await fails(fs.rename(`${d}/dir`, `${d}/f.txt`), 'ENOTDIR');
      same(await names(d), ['dir', 'f.txt'], 'names');
    },
    expect: { main: 'OK' },
    why: 'the kernel answers EISDIR and ENOTDIR from the types of the two names before it asks the filesystem',
  },
  {
    name: 'rename a directory with what it holds',
    setup: async (d) => {
      await fs.mkdir(`${d}/d1/sub`, { recursive: true });
      await fs.writeFile(`${d}/d1/sub/f.txt`, 'deep\n');
    },
    run: async (d) => {
      await fs.rename(`${d}/d1`, `${d}/d2`);
      same(await names(d), ['d2'], 'names');
      same(await text(`${d}/d2/sub/f.txt`), 'deep\n', 'content');
    },
  },
  {
    name: 'rename a directory over an empty directory',
    setup: async (d) => {
      await fs.mkdir(`${d}/d1`);
      await fs.writeFile(`${d}/d1/f.txt`, 'f\n');
      await fs.mkdir(`${d}/empty`);
    },
    run: async (d) => {
      await fs.rename(`${d}/d1`, `${d}/empty`);
      same(await names(d), ['empty'], 'names');
      same(await names(`${d}/empty`), ['f.txt'], 'names');
    },
  },
  {
    name: 'rename a directory onto a non-empty directory gives ENOTEMPTY',
    setup: async (d) => {
      await fs.mkdir(`${d}/d1`);
      await fs.writeFile(`${d}/d1/a.txt`, 'a\n');
      await fs.mkdir(`${d}/d2`);
      await fs.writeFile(`${d}/d2/b.txt`, 'b\n');
    },
    run: async (d) => {
      await fails(fs.rename(`${d}/d1`, `${d}/d2`), 'ENOTEMPTY');
      same([await names(`${d}/d1`), await names(`${d}/d2`)], [['a.txt'], ['b.txt']], 'names');
    },
  },
  {
    name: 'unlink a file',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'f\n'),
    run: async (d) => {
      await fs.unlink(`${d}/f.txt`);
      await fails(fs.stat(`${d}/f.txt`), 'ENOENT');
      same(await names(d), [], 'names');
    },
  },
  {
    name: 'rmdir: a non-empty directory gives ENOTEMPTY, an empty one goes',
    setup: async (d) => {
      await fs.mkdir(`${d}/full`);
      await fs.writeFile(`${d}/full/f.txt`, 'f\n');
      await fs.mkdir(`${d}/empty`);
    },
    run: async (d) => {
      await fails(fs.rmdir(`${d}/full`), 'ENOTEMPTY');
      await fs.rmdir(`${d}/empty`);
      same(await names(d), ['full'], 'names');
    },
  },
  {
    name: 'mkdir on an existing name gives EEXIST',
    setup: async (d) => {
      await fs.mkdir(`${d}/dir`);
      await fs.writeFile(`${d}/dir/f.txt`, 'f\n');
      await fs.writeFile(`${d}/f.txt`, 'f\n');
    },
    run: async (d) => {
      await fails(fs.mkdir(`${d}/dir`), 'EEXIST');
      await fails(fs.mkdir(`${d}/f.txt`), 'EEXIST');
    },
    expect: { main: 'OK' },
    why: 'the kernel answers EEXIST for an existing name before it asks the filesystem, as on any read-only mount',
  },
  {
    name: 'open with O_CREAT|O_EXCL on an existing file gives EEXIST',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'f\n'),
    run: async (d) => {
      await fails(fs.open(`${d}/f.txt`, 'wx'), 'EEXIST');
      same(await text(`${d}/f.txt`), 'f\n', 'content');
    },
    expect: { main: 'OK' },
    why: 'the kernel answers EEXIST for an existing name before it asks the filesystem, as on any read-only mount',
  },
  {
    name: 'symlink (ln -s) and readlink',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'target\n'),
    run: async (d) => {
      await tool('ln', '-s', 'f.txt', `${d}/link`);
      same(await fs.readlink(`${d}/link`), 'f.txt', 'readlink');
      same((await fs.lstat(`${d}/link`)).isSymbolicLink(), true, 'lstat');
      same(await text(`${d}/link`), 'target\n', 'content');
    },
  },
  {
    name: 'hard link: both names show the same file',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'one\n'),
    run: async (d) => {
      await fs.link(`${d}/f.txt`, `${d}/g.txt`);
      await fs.appendFile(`${d}/g.txt`, 'two\n');
      same(await text(`${d}/f.txt`), 'one\ntwo\n', 'content');
      same((await fs.stat(`${d}/f.txt`)).nlink, 2, 'nlink');
    },
    expect: { versioned: 'EPERM' },
    why: 'git trees cannot hold hard links: refused in versioned folders, allowed in scratch',
  },
  {
    name: 'chmod +x is kept',
    setup: (d) => fs.writeFile(`${d}/run.sh`, '#!/bin/sh\necho ok\n', { mode: 0o644 }),
    run: async (d) => {
      await tool('chmod', '+x', `${d}/run.sh`);
      same((await fs.stat(`${d}/run.sh`)).mode & 0o777, 0o755, 'mode');
      same((await tool(`${d}/run.sh`)).trim(), 'ok', 'exec');
    },
  },
  {
    name: 'readdir lists what was created, with its type',
    run: async (d) => {
      await fs.writeFile(`${d}/a.txt`, 'a');
      await fs.mkdir(`${d}/b`);
      await fs.symlink('a.txt', `${d}/c`);
      const entries = (await fs.readdir(d, { withFileTypes: true })).map((e) => `${e.name}:${e.isFile() ? 'f' : e.isDirectory() ? 'd' : e.isSymbolicLink() ? 'l' : '?'}`);
      same(entries.sort(), ['a.txt:f', 'b:d', 'c:l'], 'entries');
    },
  },
  {
    name: 'readdir shows . and .. (ls -a)',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'f'),
    mutates: false,
    run: async (d) => {
      const listed = (await tool('ls', '-a1', d)).split('\n').filter((n) => n && n !== '.keep');
      same(listed.sort(), ['.', '..', 'f.txt'], 'dot-entries');
    },
  },
  {
    name: 'stat reports sizes and kinds',
    run: async (d) => {
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
    run: async (d) => {
      const long = 'n'.repeat(255);
      await fs.writeFile(`${d}/${long}`, 'long name\n');
      same(await text(`${d}/${long}`), 'long name\n', 'content');
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
      same(await text(file), 'at the limit\n', 'content');
      await fs.rename(file, `${file.slice(0, -1)}g`);
      same(await text(`${file.slice(0, -1)}g`), 'at the limit\n', 'content');
    },
  },
  {
    name: 'deep paths (mkdir -p a/b/c/d)',
    run: async (d) => {
      await tool('mkdir', '-p', `${d}/a/b/c/d`);
      await fs.writeFile(`${d}/a/b/c/d/e.txt`, 'deep\n');
      same(await text(`${d}/a/b/c/d/e.txt`), 'deep\n', 'content');
      same(await names(`${d}/a/b/c`), ['d'], 'names');
    },
  },
  {
    name: 'a 1 MiB file round trip, whole and at an offset',
    run: async (d) => {
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
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'still here\n'),
    run: async (d) => {
      const fh = await fs.open(`${d}/f.txt`, 'r');
      try {
        await fs.unlink(`${d}/f.txt`);
        await fails(fs.stat(`${d}/f.txt`), 'ENOENT');
        const buf = Buffer.alloc(64);
        const { bytesRead } = await fh.read(buf, 0, 64, 0);
        same(buf.subarray(0, bytesRead).toString(), 'still here\n', 'content');
        same(await names(d), [], 'names-while-open');
      } finally {
        await fh.close();
      }
      same(await names(d), [], 'names');
    },
    expect: { versioned: 'names-while-open' },
    why: 'libfuse keeps an unlinked open file under a hidden name (.fuse_hidden…) that readdir lists until the last close (workspace/ is the disk itself)',
    gap: true,
  },
  {
    name: 'cp -r copies a tree, mode and symlink included',
    setup: tree,
    run: async (d) => {
      await tool('cp', '-r', `${d}/src`, `${d}/copy`);
      await tool('diff', '-r', `${d}/src`, `${d}/copy`);
      same((await fs.stat(`${d}/copy/run.sh`)).mode & 0o111, 0o111, 'mode');
      same(await fs.readlink(`${d}/copy/entry`), 'lib/util.ts', 'readlink');
    },
  },
  {
    name: 'tar c and tar x round trip',
    setup: tree,
    run: async (d) => {
      await tool('tar', '-cf', `${d}/t.tar`, '-C', d, 'src');
      await fs.mkdir(`${d}/out`);
      await tool('tar', '-xf', `${d}/t.tar`, '-C', `${d}/out`);
      await tool('diff', '-r', `${d}/src`, `${d}/out/src`);
    },
  },
  {
    name: 'mkfifo makes a named pipe',
    run: async (d) => {
      await tool('mkfifo', `${d}/pipe`);
      same((await fs.stat(`${d}/pipe`)).isFIFO(), true, 'kind');
    },
    expect: { versioned: 'EPERM' },
    why: 'git cannot hold a FIFO: special files live in scratch (workspace/, ignored paths)',
  },
  {
    name: 'utimes sets atime and mtime separately',
    setup: (d) => fs.writeFile(`${d}/f.txt`, 'f'),
    run: async (d) => {
      await fs.utimes(`${d}/f.txt`, 1_000_000, 2_000_000);
      const st = await fs.stat(`${d}/f.txt`);
      same([Math.round(st.atimeMs / 1000), Math.round(st.mtimeMs / 1000)], [1_000_000, 2_000_000], 'times');
    },
  },
  {
    name: 'a write moves mtime forward',
    setup: async (d) => {
      await fs.writeFile(`${d}/f.txt`, 'f');
    },
    run: async (d) => {
      await fs.utimes(`${d}/f.txt`, 1_000_000, 1_000_000);
      await fs.appendFile(`${d}/f.txt`, 'more');
      same((await fs.stat(`${d}/f.txt`)).mtimeMs > 1_000_000_000, true, 'mtime');
    },
  },
];
