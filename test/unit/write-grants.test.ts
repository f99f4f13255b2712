import { afterAll, describe, expect, it } from 'vitest';
import { closeSync, openSync } from 'node:fs';
import { BranchUsage } from '../../src/cow/branch/usage.js';
import { Space } from '../../src/cow/branch/space.js';
import { WriteGrants } from '../../src/cow/branch/write-grants.js';
import type { GrantDesk, GrantTerms, Settled, WriteHandle } from '../../src/cow/view.js';

const MiB = 1024 * 1024;

/** The binding's side, as grants.cc keeps it: a write within the terms is counted before it is written. */
class FakeDesk implements GrantDesk {
  readonly grants = new Map<number, GrantTerms & { wrote: boolean; failed: boolean }>();
  grant(fh: number, _fd: number, terms: GrantTerms): boolean {
    this.grants.set(fh, { ...terms, wrote: false, failed: false });
    return true;
  }
  settle(fh: number, revoke: boolean): Settled | null {
    const g = this.grants.get(fh);
    if (!g) return null;
    const out = { size: g.size, floor: g.floor, wrote: g.wrote, failed: g.failed };
    g.wrote = g.failed = false;
    if (revoke) this.grants.delete(fh);
    return out;
  }
  /** A write the binding answers itself, or false when it is JS's (as write_here decides). */
  write(fh: number, off: number, len: number): boolean {
    const g = this.grants.get(fh);
    if (!g) return false;
    const at = g.append ? g.size : off;
    if ((g.appendOnly && at < g.floor) || at + len > g.limit) return false;
    g.size = Math.max(g.size, at + len);
    if (g.appendOnly) g.floor = Math.max(g.floor, at + len);
    g.wrote = true;
    return true;
  }
}

/** Real descriptors (a grant asks how many names the file has). */
const descriptors: number[] = [];
afterAll(() => descriptors.forEach((fd) => closeSync(fd)));

function setup(limit: number, pool?: Space) {
  const usage = new BranchUsage(limit, pool);
  const open: WriteHandle[] = [];
  const writers: number[] = [];
  const grants = new WriteGrants(usage, (rel) => open.filter((h) => h.rel === rel), () => [...open], () => true, (uid) => writers.push(uid));
  const desk = new FakeDesk();
  let fh = 1;
  const openFile = (rel: string, opts: Partial<WriteHandle> = {}) => {
    const fd = openSync('/dev/null', 'r');
    descriptors.push(fd);
    const h: WriteHandle = { mode: 'write', rel, fd, size: usage.sizeOf(rel), dirty: false, append: false, appendOnly: false, floor: 0, ...opts };
    open.push(h);
    grants.offer(h, fh++, desk, 1000);
    return h;
  };
  return { usage, grants, desk, open, openFile, writers };
}

describe('write grants (write-grants.ts)', () => {
  it('holds half the room, counts what the binding wrote at settle, and gives the rest back at revoke', () => {
    const { usage, grants, desk, openFile, writers } = setup(100 * MiB);
    const h = openFile('out/a.bin');
    expect(h.grant?.live).toBe(true);
    expect(h.grant?.reserved).toBe(50 * MiB);
    expect(usage.room).toBe(50 * MiB);
    expect(usage.used).toBe(0);
    for (let i = 0; i < 256; i++) expect(desk.write(h.grant!.fh, i * 4096, 4096)).toBe(true);
    grants.settle(h, false);
    expect(usage.sizeOf('out/a.bin')).toBe(MiB);
    // Still live: what it wrote is counted, the room left is still held, and the room is what it was.
    expect(usage.used).toBe(MiB);
    expect(usage.room).toBe(50 * MiB);
    expect(h.dirty).toBe(true);
    expect(writers).toEqual([1000]);
    grants.settle(h, true);
    expect(h.grant?.live).toBe(false);
    expect(usage.used).toBe(MiB);
    expect(usage.room).toBe(99 * MiB);
    expect(desk.grants.size).toBe(0);
  });

  it('grants no more than 64 MiB, and nothing when the branch is near its quota', () => {
    const big = setup(10_000 * MiB);
    expect(big.openFile('a').grant?.reserved).toBe(64 * MiB);
    const near = setup(MiB + 100);
    const h = near.openFile('a');
    expect(h.grant?.live).toBe(false);
    expect(near.usage.used).toBe(0);
  });

  it('gives back held room before refusing a change that fits without it', () => {
    const { usage, openFile } = setup(10 * MiB);
    const h = openFile('held');
    expect(usage.room).toBe(5 * MiB);
    // 8 MiB fits the quota, not beside the 5 MiB held: the room is taken back, then the change is counted.
    expect(usage.resize('other', 8 * MiB)).toBeNull();
    expect(h.grant?.live).toBe(false);
    expect(usage.used).toBe(8 * MiB);
    expect(usage.resize('more', 3 * MiB)).toBe('EDQUOT');
  });

  it('takes held room back from the Home pool too, and when a lease lowers the limit', () => {
    const pool = new Space(20 * MiB);
    const { usage, openFile } = setup(100 * MiB, pool);
    const h = openFile('a');
    expect(pool.free).toBe(10 * MiB);
    expect(pool.used).toBe(0);
    usage.limit = 4 * MiB;
    expect(h.grant?.live).toBe(false);
    expect(pool.free).toBe(20 * MiB);
  });

  it('writes through JS a file open twice, and an append-only file below its floor', () => {
    const { grants, desk, openFile } = setup(100 * MiB);
    const first = openFile('log');
    expect(first.grant?.live).toBe(true);
    grants.revokeAt('log');
    const second = openFile('log');
    expect(second.grant?.live).toBe(false);
    const journal = openFile('journal/day.md', { appendOnly: true, floor: 0 });
    expect(desk.write(journal.grant!.fh, 0, 10)).toBe(true);
    expect(desk.write(journal.grant!.fh, 5, 10)).toBe(false);
    grants.settle(journal, true);
    expect(journal.floor).toBe(10);
  });
  // Room held in one branch counts in the Home's pool until any branch needs it (review).
  it('does not refuse another branch of the Home a change that fits the pool but for room held here', () => {
    const pool = new Space(20 * MiB);
    const { openFile } = setup(100 * MiB, pool);
    openFile('a');
    expect(pool.free).toBe(10 * MiB);
    expect(pool.used).toBe(0);
    const other = new BranchUsage(100 * MiB, pool);
    expect(other.resize('b', 15 * MiB)).toBeNull();
  });

  // A grant that wrote nothing counts nothing, also for a file removed meanwhile (review).
  it('counts nothing at settle for a grant that wrote nothing while its file was removed', () => {
    const { usage, grants, openFile } = setup(100 * MiB);
    usage.set('tmp', 3 * MiB);
    const h = openFile('tmp');
    usage.removed('tmp');
    grants.settle(h, true);
    expect(usage.sizeOf('tmp')).toBe(0);
  });
});
