import { describe, expect, it } from 'vitest';
import { BranchUsage } from '../../src/cow/branch/usage.js';
import { Space } from '../../src/cow/branch/space.js';

/**
 * What a branch counts against its quota (usage.ts), driven as the branch view drives it, by random sequences
 * of create, write, truncate, copy-up, rename over, unlink and restore, against a model of the bytes the
 * branch holds: after every step the count is the model's, never below 0, a refused step changed nothing, and
 * an accepted one never leaves the branch (or its Home's pool) past its limit.
 */

/** A small seeded generator (mulberry32): the same seed, the same sequence, so a failure can be replayed. */
function random(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n: number) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

/** Files as the branch view shows them: main's (until changed or deleted) under the branch's own. */
class Model {
  /** What the branch holds in its own layer, path to size. */
  readonly own = new Map<string, number>();
  /** main's files the view still shows (not deleted, not renamed away). */
  readonly main: Map<string, number>;

  constructor(main: Record<string, number>) {
    this.main = new Map(Object.entries(main));
  }

  get used(): number {
    let sum = 0;
    for (const size of this.own.values()) sum += size;
    return sum;
  }

  exists(p: string): boolean {
    return this.own.has(p) || this.main.has(p);
  }

  /** The size the branch holds at p (0: none of its own). */
  ownSize(p: string): number {
    return this.own.get(p) ?? 0;
  }
}

/** The step refused a growth past the limit: nothing at all changed. */
class Refused extends Error {}

const FILES = ['a', 'b', 'c', 'd/x', 'd/y', 'e/x'];
const MAIN = { a: 2000, 'd/x': 700, c: 0 };
/** Bytes another branch of the Home holds: the pool counts them too. */
const OTHER_BRANCH = 700;

/**
 * One random operation, as the branch view makes it: a file that is only in main is copied up first (its
 * size counted), then changed. Each accounting step is applied to `usage` and to the model; a refusal ends
 * the operation there (the view answers EDQUOT at that step).
 */
function step(rand: (n: number) => number, usage: BranchUsage, model: Model, limit: number, pool: Space): string {
  const pick = () => FILES[rand(FILES.length)];
  const size = () => [0, 1, 331, 2000, 3000, 5000][rand(6)] + rand(3);
  /** One accounting step: checked against the model's own arithmetic, and applied to both or to neither. */
  const resize = (p: string, to: number, how: (p: string, to: number) => string | null) => {
    const before = { used: usage.used, pool: pool.used, at: usage.sizeOf(p) };
    const growth = to - model.ownSize(p);
    const fits = growth <= 0 || (model.used + growth <= limit && OTHER_BRANCH + model.used + growth <= pool.limit);
    const refusal = how(p, to);
    if (refusal) {
      expect(refusal).toBe('EDQUOT');
      expect(fits, `refused ${p} at ${to} bytes though it fits`).toBe(false);
      expect({ used: usage.used, pool: pool.used, at: usage.sizeOf(p) }).toEqual(before);
      throw new Refused();
    }
    expect(fits, `took ${p} at ${to} bytes past the limit`).toBe(true);
    model.own.set(p, to);
  };
  /** Copy-up: a file only in main comes into the branch at main's size before it changes. */
  const copyUp = (p: string) => {
    if (model.own.has(p) || !model.main.has(p)) return;
    resize(p, model.main.get(p)!, (q, n) => usage.resize(q, n));
    model.main.delete(p);
  };
  const op = rand(8);
  const p = pick();
  switch (op) {
    case 0: {
      // create, or open with O_TRUNC: the file is empty now (always taken: nothing grows).
      usage.set(p, 0);
      model.own.set(p, 0);
      model.main.delete(p);
      return `create ${p}`;
    }
    case 1: {
      // A write at pos of len bytes: the file reaches pos + len if it was shorter.
      if (!model.exists(p)) return `write ${p}: no such file`;
      copyUp(p);
      const pos = rand(4) === 0 ? model.own.get(p)! : rand(4000);
      const len = 1 + rand(3000);
      // grow() works out the new size itself: that it is the model's is checked after the step.
      resize(p, Math.max(model.own.get(p)!, pos + len), (q) => usage.grow(q, pos + len));
      return `write ${p} ${pos}+${len}`;
    }
    case 2: {
      // truncate or ftruncate, up or down (to 0 a file from main needs no copy).
      if (!model.exists(p)) return `truncate ${p}: no such file`;
      const to = size();
      if (to === 0 && !model.own.has(p)) {
        usage.set(p, 0);
        model.own.set(p, 0);
        model.main.delete(p);
      } else copyUp(p);
      resize(p, to, (q, n) => usage.resize(q, n));
      return `truncate ${p} ${to}`;
    }
    case 3: {
      // chmod, chown or utimens of a file from main: copied up, nothing else.
      if (!model.exists(p)) return `chmod ${p}: no such file`;
      copyUp(p);
      return `chmod ${p}`;
    }
    case 4: {
      // rename over another name (or a free one): what was at the target goes, the source moves there.
      const to = pick();
      if (!model.exists(p) || p === to) return `rename ${p}: nothing to do`;
      copyUp(p);
      usage.renamed(p, to);
      model.own.set(to, model.own.get(p)!);
      model.own.delete(p);
      model.main.delete(to);
      return `rename ${p} ${to}`;
    }
    case 5: {
      // unlink of a file the branch made or copied up, or of main's (which only hides it).
      if (!model.exists(p)) return `unlink ${p}: no such file`;
      usage.removed(p);
      model.own.delete(p);
      model.main.delete(p);
      return `unlink ${p}`;
    }
    case 6: {
      // A restore (nas trash restore, nas restore) places whole content over whatever is there.
      const to = size();
      resize(p, to, (q, n) => usage.resize(q, n));
      model.main.delete(p);
      return `restore ${p} ${to}`;
    }
    default: {
      // A directory renamed over an empty (or missing) one, with all that is below it.
      const [from, to] = rand(2) ? ['d', 'e'] : ['e', 'd'];
      if ([...model.own.keys(), ...model.main.keys()].some((q) => q.startsWith(`${to}/`))) return `rename ${from}/ ${to}/: not empty`;
      for (const q of [...model.main.keys()].filter((k) => k.startsWith(`${from}/`))) copyUp(q);
      usage.renamed(from, to, true);
      for (const q of [...model.own.keys()].filter((k) => k.startsWith(`${from}/`))) {
        model.own.set(to + q.slice(from.length), model.own.get(q)!);
        model.own.delete(q);
      }
      return `rename ${from}/ ${to}/`;
    }
  }
}

describe('what a branch counts against its quota', () => {
  it('counts exactly what the branch holds through random sequences, never below 0, never past its limit', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rand = random(seed);
      const limit = [4096, 6000, 10_000, 1_000_000][rand(4)];
      // The Home's pool holds another branch's bytes already; sometimes it is the tighter bound.
      const pool = new Space([5000, 1_000_000][rand(2)]);
      pool.add(OTHER_BRANCH);
      const usage = new BranchUsage(limit, pool);
      const model = new Model(MAIN);
      const done: string[] = [];
      for (let i = 0; i < 30; i++) {
        try {
          done.push(step(rand, usage, model, limit, pool));
        } catch (e) {
          if (!(e instanceof Refused)) throw new Error(`seed ${seed}, after ${done.join('; ')}: ${(e as Error).message}`);
          done.push('(refused)');
        }
        const where = `seed ${seed}: ${done.join('; ')}`;
        expect(usage.used, where).toBe(model.used);
        expect(usage.used, where).toBeGreaterThanOrEqual(0);
        expect(usage.used, where).toBeLessThanOrEqual(limit);
        expect(pool.used, where).toBe(OTHER_BRANCH + model.used);
        expect(pool.used, where).toBeLessThanOrEqual(pool.limit);
        for (const f of FILES) expect(usage.sizeOf(f), `${where}: ${f}`).toBe(model.own.get(f) ?? 0);
      }
      // A branch that goes away gives all of its bytes back to the Home.
      usage.release();
      expect(usage.used).toBe(0);
      expect(pool.used).toBe(OTHER_BRANCH);
    }
  });

  it("counts the issue's two sequences as what the branch holds", () => {
    // blob.bin is 2,000 bytes in main: 3,000 written over it, then 1 (the count went to -331 and below).
    const usage = new BranchUsage(4096);
    expect(usage.resize('blob.bin', 2000)).toBeNull(); // copy-up
    usage.set('blob.bin', 0); // truncated by name while a descriptor is open
    expect(usage.grow('blob.bin', 3000)).toBeNull();
    usage.set('blob.bin', 0);
    expect(usage.grow('blob.bin', 1)).toBeNull();
    expect(usage.used).toBe(1);
    // Under a budget of 4,096 bytes, 5,000 more do not fit, before a byte is written, and nothing changes.
    expect(usage.grow('big.bin', 5000)).toBe('EDQUOT');
    expect(usage.used).toBe(1);
    expect(usage.sizeOf('big.bin')).toBe(0);
    expect(usage.grow('big.bin', 4095)).toBeNull();
    expect(usage.grow('big.bin', 4096)).toBe('EDQUOT');
    expect(usage.used).toBe(4096);
  });

  it('counts what is below a directory renamed over an empty one, and a lowered limit refuses only growth', () => {
    const usage = new BranchUsage(100);
    usage.set('d/x', 10);
    usage.set('d/e/y', 20);
    usage.set('dx', 5);
    usage.renamed('d', 'n', true);
    expect([usage.sizeOf('n/x'), usage.sizeOf('n/e/y'), usage.sizeOf('dx'), usage.sizeOf('d/x')]).toEqual([10, 20, 5, 0]);
    expect(usage.used).toBe(35);
    // A lease's budget below what the branch holds: it may shrink, not grow.
    usage.limit = 30;
    expect(usage.grow('dx', 6)).toBe('EDQUOT');
    expect(usage.resize('n/e/y', 10)).toBeNull();
    expect(usage.used).toBe(25);
  });
});
