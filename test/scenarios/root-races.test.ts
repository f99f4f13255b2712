import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import { ROOT, TestDaemon, run } from '../helpers.js';
import { client, type Call } from '../../src/api/client.js';

/**
 * Issue 20, Critical 1 and 2: nasd, as root, writes and removes in trees its users can change (a branch's
 * upper directory through the mount, its workspace/ straight on disk). A swapping loop exchanges a directory on
 * the way with a symbolic link to a directory outside the Home, thousands of times, while an entry point runs
 * over and over: nothing outside may change.
 */

/** Swap two names as fast as the kernel lets it: renameat2(RENAME_EXCHANGE), or two renames where that is refused. */
const SWAPPER = `
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b, spare, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
exchange = sys.argv[5] == 'exchange'
done = 0
tries = 0
def mv(x, y):
    try:
        os.rename(x, y)
        return True
    except OSError:
        return False
while not stop and done < rounds:
    if exchange:
        if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) == 0:
            done += 1
            continue
        exchange = False
    # Two renames a round: the directory out of the way, the link in its place, and back. The directory
    # steps aside under a name no round used before: while it is away, a restore into it makes it anew
    # (a restore creates missing parents), so that round cannot put it back and leaves it under that name;
    # with one spare name every later round would fail (ENOTEMPTY) and never end.
    aside = spare + str(tries)
    tries += 1
    if mv(a, aside):
        if mv(b, a):
            mv(a, b)
        mv(aside, a)
        done += 1
        print('.', end='', flush=True)
print(done)
`;

describe('root-side operations in trees users change (issue 20, Critical 1 and 2)', () => {
  let d: TestDaemon;
  let api: Call;
  let outside: string;
  const p = (rel: string) => d.path('demo@race', rel);
  const swappers: ChildProcess[] = [];

  /** Everything in the outside directory: names, modes, owners and content. */
  async function outsideState(): Promise<string> {
    const names = (await fs.readdir(outside)).sort();
    const rows = await Promise.all(names.map(async (n) => {
      const st = await fs.lstat(`${outside}/${n}`);
      const body = st.isFile() ? await fs.readFile(`${outside}/${n}`, 'utf8') : '';
      return `${n} ${st.mode.toString(8)} ${st.uid} ${body}`;
    }));
    return rows.join('\n');
  }

  /**
   * Swap a and b in the background (spare: where the two-rename fallback puts a aside, numbered by round) for
   * `rounds` rounds, or until stopped; `done` resolves with the swaps made. Through the mount a round prints a dot:
   * `round()` waits for the next.
   */
  function swapping(a: string, b: string, spare: string, rounds = 2_000_000) {
    // Through the mount, two renames a round (nasd refuses RENAME_EXCHANGE: no view can swap two names in one commit).
    const how = rounds === 2_000_000 ? 'exchange' : 'renames';
    const child = spawn('python3', ['-c', SWAPPER, a, b, spare, String(rounds), how], { stdio: ['ignore', 'pipe', 'inherit'] });
    swappers.push(child);
    let out = '';
    let wake = () => undefined as void;
    child.stdout!.on('data', (c) => {
      out += c;
      wake();
    });
    const done = new Promise<number>((resolve) => child.on('exit', () => {
      wake();
      resolve(Number(out.replace(/\./g, '').trim()) || 0);
    }));
    const rounds_ = () => out.replace(/[^.]/g, '').length;
    const running = () => child.exitCode === null && child.signalCode === null;
    /** Wait until the swapper has made another round (or ended). */
    const round = async () => {
      const seen = rounds_();
      while (rounds_() === seen && running()) await new Promise<void>((r) => (wake = r));
    };
    return { done, stop: () => child.kill('SIGTERM'), running, round };
  }

  beforeAll(async () => {
    d = await TestDaemon.withBranch('race');
    const token = (await fs.readFile(`${d.state}/owner.token`, 'utf8')).trim();
    api = client({ socket: d.socket, headers: { 'x-nas-owner': token } });
    outside = `${d.dir}/outside`;
    await fs.mkdir(outside, { mode: 0o700 });
    await fs.writeFile(`${outside}/victim`, 'ORIGINAL\n', { mode: 0o600 });
  });
  afterEach(() => {
    for (const c of swappers.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('trash restore --to through a directory swapped with a link, in a versioned folder and in workspace/', async () => {
    const before = await outsideState();
    await fs.writeFile(p('outbox/victim'), 'FROM THE BRANCH\n');
    await d.sync('demo/race');
    await fs.unlink(p('outbox/victim'));
    await d.sync('demo/race');
    const id = (await d.nasJson<{ id: string; path: string }[]>('trash', 'list', 'demo')).find((r) => r.path === 'outbox/victim')!.id;
    for (const area of ['workspace', 'outbox']) {
      await fs.mkdir(p(`${area}/d`));
      await fs.symlink(outside, p(`${area}/l`));
      // In workspace/ (the disk itself) the swaps run freely while 150 restores run; through the mount each
      // round is renames nasd answers, so restores and rounds take turns (each running while the other does).
      const fuse = area === 'outbox';
      const swap = swapping(p(`${area}/d`), p(`${area}/l`), p(`${area}/spare`), fuse ? 30 : undefined);
      let tries = 0;
      for (; fuse ? swap.running() && tries < 600 : tries < 150; tries++) {
        // A new name each time: a restore that went through the link would make it outside.
        await api('restoreTrash', { role: 'demo' }, { id, branch: 'race', to: `${area}/d/victim-${tries}` }).catch(() => undefined);
        // Restores in a row starve renames through the mount: let the swapper make a round between two.
        if (fuse) await swap.round();
      }
      swap.stop();
      expect(await swap.done).toBeGreaterThanOrEqual(fuse ? 30 : tries);
      expect(await outsideState()).toBe(before);
    }
  });

  it('a restore that makes the swapped directory anew while it is away leaves the swapper going', async () => {
    // What the race above hits by chance: a round has moved the directory aside, and a restore into it makes it
    // again (a restore creates missing parents). That round cannot put the old one back; the next rounds must
    // still swap (with one spare name, every rename of a round was answered ENOTEMPTY, round after round).
    const before = await outsideState();
    await fs.writeFile(p('outbox/qvictim'), 'FROM THE BRANCH\n');
    await d.sync('demo/race');
    await fs.unlink(p('outbox/qvictim'));
    await d.sync('demo/race');
    const id = (await d.nasJson<{ id: string; path: string }[]>('trash', 'list', 'demo')).find((r) => r.path === 'outbox/qvictim')!.id;
    await fs.mkdir(p('outbox/q'));
    await fs.writeFile(p('outbox/q/kept'), 'KEPT\n');
    await fs.symlink(outside, p('outbox/ql'));
    await fs.rename(p('outbox/q'), p('outbox/qspare'));
    await api('restoreTrash', { role: 'demo' }, { id, branch: 'race', to: 'outbox/q/victim' });
    expect((await fs.lstat(p('outbox/q'))).isDirectory()).toBe(true);
    const swap = swapping(p('outbox/q'), p('outbox/ql'), p('outbox/qspare'), 3);
    expect(await swap.done).toBe(3);
    expect((await fs.readdir(p('outbox/q'))).sort()).toEqual(['victim']);
    expect(await fs.readlink(p('outbox/ql'))).toBe(outside);
    expect(await outsideState()).toBe(before);
  });

  it('nas restore of a folder through a directory swapped with a link', async () => {
    const before = await outsideState();
    await fs.mkdir(p('outbox/r'));
    await fs.writeFile(p('outbox/r/victim'), 'OLD\n');
    await d.sync('demo/race');
    const old = (await d.git('rev-parse', 'race')).stdout.trim();
    await fs.rm(p('outbox/r'), { recursive: true });
    await fs.mkdir(p('outbox/r'));
    await fs.symlink(outside, p('outbox/rl'));
    await d.sync('demo/race');
    const emptied = (await d.git('rev-parse', 'race')).stdout.trim();
    const swap = swapping(p('outbox/r'), p('outbox/rl'), p('outbox/rspare'), 30);
    for (let i = 0; swap.running() && i < 300; i++) {
      // Each restore finds outbox/r/victim gone again (the last one's was taken back by a restore to the newest state).
      await api('restore', { role: 'demo' }, { branch: 'race', from: old, paths: ['outbox/r'] }).catch(() => undefined);
      await api('restore', { role: 'demo' }, { branch: 'race', from: emptied, paths: ['outbox/r'] }).catch(() => undefined);
      await swap.round();
    }
    swap.stop();
    expect(await swap.done).toBe(30);
    expect(await outsideState()).toBe(before);
  });

  it('nas export refuses a directory reached through a link, and writes nothing there', async () => {
    const before = await outsideState();
    const mine = `${d.dir}/mine`;
    await fs.mkdir(mine);
    await fs.symlink(outside, `${mine}/l`);
    const r = await d.nas('export', 'demo', `${mine}/l/home.bundle`);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/symbolic link; nothing was written/);
    expect(await outsideState()).toBe(before);
    // The real directory takes it.
    expect((await d.nas('export', 'demo', `${mine}/home.bundle`)).code).toBe(0);
    expect((await fs.stat(`${mine}/home.bundle`)).mode & 0o777).toBe(0o600);
    expect((await fs.readdir(mine)).sort()).toEqual(['home.bundle', 'l']);
  });

  it("keeps a run's directory root's: its user gets the socket and the briefing, nothing to rename in", async () => {
    const r = await run(process.execPath, [
      `${ROOT}/dist/src/cli/main.js`, '--socket', d.socket, 'run', 'demo', '--user', 'nobody', '--',
      'sh', '-c', 'dir=$(dirname "$NAS_SOCKET"); stat -c "%U %a" "$dir"; test -r "$NAS_BRIEFING_FILE" && echo briefing; ln -s / "$dir/x" 2>/dev/null && echo linked; mv "$NAS_BRIEFING_FILE" "$dir/moved" 2>/dev/null && echo moved; true',
    ], { env: { NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`, NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '' } });
    expect(r.stdout).toContain('root 755');
    expect(r.stdout).toContain('briefing');
    expect(r.stdout).not.toContain('linked');
    expect(r.stdout).not.toContain('moved');
  });
});
