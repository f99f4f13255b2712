import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, run } from '../helpers.js';

/**
 * A branch's quota and a lease's budget are bounds (issue 31, item 2): a branch counts the bytes of the files it
 * holds, each at its size now, so writing a file from main over, bigger and then smaller, never shows a
 * negative use, and no sequence of writes takes a branch past its budget. Checked through the mount with real
 * tools, as the lease's principal (a real user through setpriv) where a lease is in force, and in what
 * `nas branch list --json` shows, also after a restart.
 */
const AGENT = 4262;
const asUser = (uid: number, script: string) => run('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'sh', '-c', script]);
/** As the agent, `file` written over with n bytes in one write(2), as `>` does it (open, truncate, write). */
const writeAs = (uid: number, file: string, n: number) =>
  asUser(uid, `head -c ${n} /dev/zero | dd of=${file} bs=${Math.max(n, 1)} count=1 iflag=fullblock status=none`);

describe('quota and lease budget as bounds', () => {
  let d: TestDaemon;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  /** What `nas branch list --json` says the branch holds: never below 0. */
  const used = async (branch: string): Promise<number> => {
    const n = (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === branch).quota.used;
    expect(n, `${branch} counts ${n} bytes`).toBeGreaterThanOrEqual(0);
    return n;
  };

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    // The test's temporary directory is private to root; the lease's principal needs to reach the mount inside it.
    await fs.chmod(d.dir, 0o755);
    await d.pushToMain({ 'outbox/blob.bin': Buffer.alloc(2000, 7) });
    for (const b of ['over', 'leased']) expect((await d.nas('branch', 'create', `demo/${b}`)).code).toBe(0);
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('counts a file from main written over bigger, then smaller, at its size: never below 0, and the same after a restart', async () => {
    const blob = p('over', 'outbox/blob.bin');
    const before = await used('over');
    // As the issue found it: 2,000 bytes in main, 3,000 written over them, then 1 (the count went below 0).
    await fs.writeFile(blob, Buffer.alloc(3000, 1));
    await fs.writeFile(blob, Buffer.alloc(1, 1));
    expect(await used('over')).toBe(before + 1);
    // Each step on its own, with the shell's `>` (open, then a truncate by name), and truncate(1) up and down.
    expect((await run('sh', ['-c', `head -c 3000 /dev/zero > ${blob}`])).code).toBe(0);
    expect(await used('over')).toBe(before + 3000);
    expect((await run('sh', ['-c', `printf x > ${blob}`])).code).toBe(0);
    expect(await used('over')).toBe(before + 1);
    expect((await run('truncate', ['-s', '5000', blob])).code).toBe(0);
    expect(await used('over')).toBe(before + 5000);
    expect((await run('truncate', ['-s', '10', blob])).code).toBe(0);
    expect(await used('over')).toBe(before + 10);
    expect((await run('sh', ['-c', `printf 12345 >> ${blob}`])).code).toBe(0);
    expect(await used('over')).toBe(before + 15);
    // A file renamed over it replaces its bytes; an unlink gives them back; a trash restore brings them again.
    await fs.writeFile(p('over', 'outbox/new.txt'), Buffer.alloc(100, 2));
    expect(await used('over')).toBe(before + 115);
    expect((await run('mv', [p('over', 'outbox/new.txt'), blob])).code).toBe(0);
    expect(await used('over')).toBe(before + 100);
    await fs.unlink(blob);
    expect(await used('over')).toBe(before);
    await d.sync('demo/over');
    const restored = await d.nas('trash', 'restore', 'demo', 'outbox/blob.bin', '--branch', 'over');
    expect(restored.code, restored.stderr).toBe(0);
    expect((await fs.stat(blob)).size).toBe(100);
    expect(await used('over')).toBe(before + 100);
    // A restart counts the upper directory again: the same number.
    await d.stop();
    d = await d.restart();
    expect(await used('over')).toBe(before + 100);
  });

  it("holds a lease's --budget 4096 as a bound: a file from main written over bigger, then smaller, leaves no room for 5,000 more bytes", async () => {
    const issued = await d.nas('lease', 'issue', 'demo/leased', '--principal', String(AGENT), '--ttl', '1h', '--budget', '4096');
    expect(issued.code, issued.stderr).toBe(0);
    const budget = async () => {
      const n = await used('leased');
      expect(n).toBeLessThanOrEqual(4096);
      return n;
    };
    const before = await budget();
    const big = p('leased', 'outbox/big.bin');
    const blob = p('leased', 'outbox/blob.bin');
    const sizeOf = async (file: string) => (await fs.stat(file).catch(() => null))?.size ?? 0;
    expect((await writeAs(AGENT, big, 5000)).stderr).toMatch(/Disk quota exceeded/);
    // blob.bin is 2,000 bytes in main: 3,000 over it, then 1.
    const bigger = await writeAs(AGENT, blob, 3000);
    expect(bigger.code, bigger.stderr).toBe(0);
    const smaller = await writeAs(AGENT, blob, 1);
    expect(smaller.code, smaller.stderr).toBe(0);
    // 1 + 5,000 bytes would be past 4,096: refused, whatever came before (the branch took all 5,001).
    expect((await writeAs(AGENT, big, 5000)).stderr).toMatch(/Disk quota exceeded/);
    expect((await sizeOf(blob)) + (await sizeOf(big))).toBeLessThanOrEqual(4096);
    expect(await budget()).toBe(before + (await sizeOf(blob)) + (await sizeOf(big)));
    // What fits still fits, to the byte, and nothing more.
    await fs.rm(big, { force: true });
    const room = 4096 - (await budget());
    const fits = await writeAs(AGENT, big, room);
    expect(fits.code, fits.stderr).toBe(0);
    expect(await budget()).toBe(4096);
    expect(await codeOf(fs.appendFile(big, 'y'))).toBe('EDQUOT');
    expect(await budget()).toBe(4096);
    // A trash restore is held to the budget too: the room big.bin left is taken, so it does not come back.
    await d.sync('demo/leased');
    await fs.rm(big);
    await d.sync('demo/leased');
    const other = await writeAs(AGENT, p('leased', 'outbox/other.bin'), room);
    expect(other.code, other.stderr).toBe(0);
    const restore = await d.nas('trash', 'restore', 'demo', 'outbox/big.bin', '--branch', 'leased');
    expect(restore.code).not.toBe(0);
    expect(restore.stderr).toMatch(/outbox\/big\.bin: its \d+ bytes would take the branch past its quota.*EDQUOT/);
    expect(await sizeOf(big)).toBe(0);
    expect(await budget()).toBe(4096);
  });
});
