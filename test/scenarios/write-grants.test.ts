import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import { TestDaemon, codeOf, eventually, run } from '../helpers.js';

/**
 * Issue 34: the writes of a file open for writing are answered by the binding alone (a write grant), with every
 * promise a write through nasd's JS keeps: close-to-commit, fsync = committed, the quota to the byte, the
 * append-only floor, one writer's bytes not lost beside another's, a rename or a lease's end while open.
 */
describe('writes the binding answers alone (write grants)', () => {
  let d: TestDaemon;
  let metrics: string;
  const p = (branch: string, rel: string) => d.path(`demo@${branch}`, rel);
  /** Writes the binding answered under a grant since nasd started (its /metrics). */
  const granted = async () => {
    const text = await (await fetch(metrics)).text();
    return Number(/^nas_fuse_cache_requests\{by="write"\} (\d+)/m.exec(text)?.[1] ?? 0);
  };
  /** Writes `data` through one descriptor in 4 KiB writes, as head, loggers and Python's buffering write. */
  const writeSmall = async (file: string, data: Buffer, flags = 'w') => {
    const fh = await fs.open(file, flags);
    for (let at = 0; at < data.length; at += 4096) await fh.write(data, at, Math.min(4096, data.length - at));
    return fh;
  };

  beforeAll(async () => {
    d = await TestDaemon.withBranch('w', { extraArgs: ['--metrics-listen', '127.0.0.1:0'] });
    metrics = (await d.nasJson<{ metrics: string }>('status')).metrics;
  });
  afterAll(async () => {
    await d?.cleanup();
  });

  it('commits a file written in 4 KiB writes whole at its close, the writes answered by the binding', async () => {
    const before = await granted();
    const data = randomBytes(8 * 1024 * 1024);
    await (await writeSmall(p('w', 'outbox/seq.bin'), data)).close();
    await d.sync('demo/w');
    expect((await d.gitBlob('w:outbox/seq.bin')).equals(data)).toBe(true);
    // 2,048 writes; the binding took them (a few may come to JS, at the edge of a grant's room).
    expect(await granted() - before).toBeGreaterThan(2000);
  });

  it('commits at fsync what the binding wrote, while the file stays open, and the rest at close', async () => {
    const first = randomBytes(100 * 4096);
    const fh = await writeSmall(p('w', 'outbox/synced.bin'), first);
    await fh.sync();
    expect((await d.gitBlob('w:outbox/synced.bin')).equals(first)).toBe(true);
    const more = randomBytes(50 * 4096);
    for (let at = 0; at < more.length; at += 4096) await fh.write(more, at, 4096);
    await fh.close();
    await d.sync('demo/w');
    expect((await d.gitBlob('w:outbox/synced.bin')).equals(Buffer.concat([first, more]))).toBe(true);
  });

  it('holds the quota to the byte: 4 KiB writes stop with EDQUOT where the quota ends, and what fit is committed', async () => {
    const quota = 4 * 1024 * 1024;
    const limits = (await fs.readFile(d.path('demo', '.nas/limits.yaml'), 'utf8')).replace(/branch_quota_bytes: \d+/, `branch_quota_bytes: ${quota}`);
    await d.pushToMain({ '.nas/limits.yaml': limits });
    expect((await d.nas('branch', 'create', 'demo/q')).code).toBe(0);
    const used = async () => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'q').quota.used as number;
    const room = quota - (await used());
    const block = randomBytes(4096);
    // Another file open for writing holds room for its own writes: room it does not use is no reason to refuse.
    const held = await fs.open(p('q', 'outbox/held.bin'), 'w');
    await held.write(block, 0, 4096);
    const fh = await fs.open(p('q', 'outbox/fill.bin'), 'w');
    let written = 0;
    let refused: string | undefined;
    while (written <= quota) {
      refused = await codeOf(fh.write(block, 0, 4096));
      if (refused !== 'OK') break;
      written += 4096;
    }
    await fh.close();
    await held.close();
    expect(refused).toBe('EDQUOT');
    // Every write that fit was taken, whole, and the first that did not was refused whole.
    expect(written).toBe(Math.floor((room - 4096) / 4096) * 4096);
    await d.sync('demo/q');
    expect((await d.gitBlob('q:outbox/fill.bin')).length).toBe(written);
    expect(await used()).toBeLessThanOrEqual(quota);
    // Freeing room makes room again.
    await fs.unlink(p('q', 'outbox/fill.bin'));
    await fs.writeFile(p('q', 'outbox/after.bin'), randomBytes(2 * 1024 * 1024));
    await d.sync('demo/q');
    expect((await d.gitBlob('q:outbox/after.bin')).length).toBe(2 * 1024 * 1024);
  });

  it('keeps an append-only file\'s floor: pwrite below what was written is EPERM, writes past it land', async () => {
    const script = [
      'import os',
      `fd = os.open(${JSON.stringify(p('w', 'memory/journal/grant.md'))}, os.O_WRONLY | os.O_CREAT, 0o644)`,
      'for i in range(64): os.write(fd, b"%04d entry\\n" % i)',
      'try:',
      '    os.pwrite(fd, b"FORGED", 100)',
      '    print("rewrote")',
      'except OSError as e:',
      '    print(e.strerror)',
      'os.write(fd, b"last\\n")',
      'os.close(fd)',
    ].join('\n');
    const py = await run('python3', ['-c', script]);
    expect(py.stdout.trim()).toBe('Operation not permitted');
    await d.sync('demo/w');
    const want = Array.from({ length: 64 }, (_, i) => `${String(i).padStart(4, '0')} entry\n`).join('') + 'last\n';
    expect((await d.gitBlob('w:memory/journal/grant.md')).toString()).toBe(want);
  });

  it('loses no byte of two O_APPEND writers of one file, or of a file renamed while written', async () => {
    const log = p('w', 'outbox/two.log');
    const a = await fs.open(log, 'a');
    const b = await fs.open(log, 'a');
    for (let i = 0; i < 200; i++) {
      await a.write(`a${String(i).padStart(4, '0')}\n`);
      await b.write(`b${String(i).padStart(4, '0')}\n`);
    }
    await a.close();
    await b.close();
    const moving = await writeSmall(p('w', 'outbox/before.bin'), randomBytes(64 * 4096));
    await fs.rename(p('w', 'outbox/before.bin'), p('w', 'outbox/after.bin'));
    const tail = randomBytes(64 * 4096);
    for (let at = 0; at < tail.length; at += 4096) await moving.write(tail, at, 4096);
    await moving.close();
    await d.sync('demo/w');
    const lines = (await d.gitBlob('w:outbox/two.log')).toString().split('\n').filter(Boolean);
    expect(lines).toHaveLength(400);
    expect(lines.filter((l) => l.startsWith('a'))).toEqual(Array.from({ length: 200 }, (_, i) => `a${String(i).padStart(4, '0')}`));
    const after = await d.gitBlob('w:outbox/after.bin');
    expect(after.length).toBe(128 * 4096);
    expect(after.subarray(64 * 4096).equals(tail)).toBe(true);
    expect(await codeOf(fs.stat(p('w', 'outbox/before.bin')))).toBe('ENOENT');
  });

  // A file unlinked or truncated by another open while a grant writes it is counted as it is left, not as the grant knew it.
  it('counts nothing for a file written, unlinked while open, then closed', async () => {
    await d.sync('demo/w');
    const used = async () => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'w').quota.used as number;
    const before = await used();
    const fh = await writeSmall(p('w', 'outbox/gone.bin'), randomBytes(1024 * 1024));
    await fs.unlink(p('w', 'outbox/gone.bin'));
    await fh.close();
    await d.sync('demo/w');
    expect(await used()).toBe(before);
  });

  it('counts an empty file for one a second open truncated while the first writer had a grant', async () => {
    await d.sync('demo/w');
    const used = async () => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'w').quota.used as number;
    const before = await used();
    const first = await writeSmall(p('w', 'outbox/trunc.bin'), randomBytes(1024 * 1024));
    const second = await fs.open(p('w', 'outbox/trunc.bin'), 'w');
    await second.close();
    await first.close();
    await d.sync('demo/w');
    expect((await fs.stat(p('w', 'outbox/trunc.bin'))).size).toBe(0);
    expect(await used()).toBe(before);
  });

  // No grant outlives the branch's expiry: not even one renewed by a write JS answered while expiry synced.
  it('refuses a write after the branch expired, from a writer that kept writing through the expiry', async () => {
    expect((await d.nas('branch', 'create', 'demo/short', '--ttl', '3s')).code).toBe(0);
    const fh = await fs.open(p('short', 'outbox/stream.bin'), 'w');
    const block = randomBytes(4096);
    let stop = false;
    const writer = (async () => {
      while (!stop) {
        if ((await codeOf(fh.write(block, 0, 4096))) !== 'OK') return;
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    await eventually(async () => (await d.nasJson<any[]>('branch', 'list', 'demo')).find((b) => b.name === 'short')?.expired, 'the branch to expire', 20_000);
    stop = true;
    await writer;
    expect(await codeOf(fh.write(block, 0, 4096))).toBe('EROFS');
    await fh.close();
  });

  // A grant is its opener's: another account's write through the same descriptor is JS's, and named.
  it('names in Nas-Writers the account that wrote through a descriptor it was handed', async () => {
    expect((await d.nas('branch', 'create', 'demo/handed')).code).toBe(0);
    expect((await d.nas('lease', 'issue', 'demo/handed', '--principal', 'nobody')).code).toBe(0);
    await d.sync('demo/handed');
    const script = [
      'import os',
      `fd = os.open(${JSON.stringify(p('handed', 'outbox/handed.log'))}, os.O_WRONLY | os.O_CREAT, 0o644)`,
      'pid = os.fork()',
      'if pid == 0:',
      '    os.setgid(65534); os.setuid(65534)',
      '    os.write(fd, b"written by nobody\\n")',
      '    os._exit(0)',
      'os.waitpid(pid, 0)',
      'os.close(fd)',
    ].join('\n');
    expect((await run('python3', ['-c', script])).code).toBe(0);
    await d.sync('demo/handed');
    expect((await d.git('log', '-1', '--format=%B', 'refs/heads/handed')).stdout).toMatch(/^Nas-Writers: .*nobody \(uid 65534\)/m);
  });
});
