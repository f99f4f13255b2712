import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import { Beneath } from '../../src/util/beneath.js';
import { codeOf, run } from '../helpers.js';

/** The race-free primitive every root-side file operation in a user's tree goes through (issue 20). */
describe('Beneath', () => {
  let dir: string;
  let tree: string;
  let outside: string;
  const listing = async (d: string) => (await fs.readdir(d)).sort();

  beforeEach(async () => {
    dir = await fs.mkdtemp(`${os.tmpdir()}/nas-beneath-`);
    tree = `${dir}/tree`;
    outside = `${dir}/outside`;
    await fs.mkdir(tree);
    await fs.mkdir(outside);
    for (const name of ['victim', 'keep']) await fs.writeFile(`${outside}/${name}`, 'ORIGINAL\n', { mode: 0o600 });
  });
  afterEach(async () => {
    await run('umount', ['-l', `${tree}/d/mnt`]);
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('never acts through a link: every step of a path refuses one, in the middle or at the end', async () => {
    const t = new Beneath(tree);
    await fs.symlink(outside, `${tree}/l`);
    expect(await codeOf(t.createFile('l/new', 'x', { mode: 0o600 }))).toBe('ELOOP');
    expect(await codeOf(t.mkdir('l/new', { mode: 0o700 }))).toBe('ELOOP');
    expect(await codeOf(t.mkdir('l', { mode: 0o700 }))).toBe('EEXIST');
    expect(await codeOf(t.readFile('l/victim'))).toBe('ELOOP');
    expect(await codeOf(t.at('l/x/y', (p) => fs.mkdir(p)))).toBe('ELOOP');
    expect(await codeOf(t.readFile('l'))).toBe('EINVAL');
    expect(await codeOf(t.at('l/victim', (p) => fs.unlink(p)))).toBe('ELOOP');
    expect(await codeOf(t.at('../outside/victim', (p) => fs.unlink(p)))).toBe('EINVAL');
    await fs.mkdir(`${tree}/d`);
    await fs.symlink(`${outside}/victim`, `${tree}/d/v`);
    expect(await codeOf(t.createFile('d/v', 'x', { mode: 0o600 }))).toBe('EEXIST');
    await t.removeTree('d');
    expect(await listing(tree)).toEqual(['l']);
    expect(await listing(outside)).toEqual(['keep', 'victim']);
    expect(await fs.readFile(`${outside}/victim`, 'utf8')).toBe('ORIGINAL\n');
  });

  it('makes a directory with its mode and owner exactly, whatever the umask', async () => {
    const mask = process.umask(0o077);
    try {
      await new Beneath(tree).mkdir('mine', { mode: 0o711, uid: 65534, gid: 65534 });
    } finally {
      process.umask(mask);
    }
    const st = await fs.lstat(`${tree}/mine`);
    expect([st.isDirectory(), st.uid, st.gid, st.mode & 0o7777]).toEqual([true, 65534, 65534, 0o711]);
  });

  it('removes a tree whose directories are swapped for links meanwhile, and nothing outside it', async () => {
    const t = new Beneath(tree);
    let swaps = 0;
    for (let round = 0; round < 12; round++) {
      await fs.mkdir(`${tree}/d`);
      // The names of the files outside, among many others, so a followed link would remove them.
      for (let k = 0; k < 50; k++) await fs.mkdir(`${tree}/d/sub${k}`);
      for (const name of ['victim', 'keep']) await fs.writeFile(`${tree}/d/${name}`, 'x');
      await fs.symlink(outside, `${tree}/l`);
      // The swapper exchanges d and l (a link to outside) as fast as it can while the removal runs.
      const swapper = spawn('python3', ['-c', [
        'import ctypes, signal, sys', 'libc = ctypes.CDLL(None, use_errno=True)',
        'a, b = sys.argv[1].encode(), sys.argv[2].encode()', 'n = [0]',
        'signal.signal(signal.SIGTERM, lambda *_: (print(n[0]), sys.exit(0)))',
        'print("go", flush=True)',
        'while True:', '    n[0] += libc.renameat2(-100, a, -100, b, 2) == 0',
      ].join('\n'), `${tree}/d`, `${tree}/l`], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      const exited = new Promise((resolve) => swapper.on('exit', resolve));
      await new Promise((resolve) => swapper.stdout!.on('data', (c) => (out += c).includes('go') && resolve(null)));
      try {
        await t.removeTree('d').catch((e) => {
          // The swap may win every look at a name (then it says so); it never makes the removal go elsewhere.
          if (!['ELOOP', 'ENOTDIR', 'ENOTEMPTY', 'EISDIR', 'ENOENT'].includes(e.code)) throw e;
        });
        await t.removeTree('l');
      } finally {
        swapper.kill('SIGTERM');
        await exited;
      }
      swaps += Number(out.replace('go', '').trim()) || 0;
      // What the swap left inside the tree goes before the next round; outside, nothing has changed.
      await t.removeTree('d');
      await t.removeTree('l');
      expect(await listing(outside)).toEqual(['keep', 'victim']);
    }
    expect(swaps).toBeGreaterThan(1000);
    expect(await fs.readFile(`${outside}/victim`, 'utf8')).toBe('ORIGINAL\n');
  });

  it('does not leave its filesystem: a mount point inside is refused and what it holds stays', async () => {
    await fs.mkdir(`${tree}/d/mnt`, { recursive: true });
    await fs.writeFile(`${tree}/d/file`, 'x');
    expect((await run('mount', ['-t', 'tmpfs', 'tmpfs', `${tree}/d/mnt`])).code).toBe(0);
    await fs.writeFile(`${tree}/d/mnt/precious`, 'keep me\n');
    expect(await codeOf(new Beneath(tree).removeTree('d'))).toBe('EXDEV');
    expect(await fs.readFile(`${tree}/d/mnt/precious`, 'utf8')).toBe('keep me\n');
  });
});
