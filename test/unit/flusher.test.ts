import { describe, expect, it } from 'vitest';
import { Flusher } from '../../src/cow/branch/flusher.js';

/**
 * The Flusher alone, with a fake commit and real (short) timers. What it promises: changes within a window
 * become one commit, flushNow resolves only once everything marked before it is committed, a failed commit
 * is retried by itself, and stop() cancels what is scheduled. Assertions are on counts and order, never on
 * how long anything took.
 */

/** A promise and the function that settles it: lets a test hold a commit open as long as it likes. */
function gate<T = void>(): { promise: Promise<T>; open: (v: T) => void } {
  let open!: (v: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

/** Whether a promise has settled, without waiting for it. */
function watch(p: Promise<unknown>): { settled: boolean } {
  const state = { settled: false };
  p.then(() => (state.settled = true), () => (state.settled = true));
  return state;
}

/** Let every promise callback that is ready run (and a timer turn pass), so a wrong early resolution would show. */
const drain = () => new Promise((r) => setTimeout(r, 5));

/**
 * A fake branch: `mark` records a change and schedules it, as BranchView.markDirty does; each commit takes
 * what is marked at the moment it starts (as commitPending does) and waits for `hold` when one is set.
 */
function fakeBranch(windowMs: number) {
  const state = {
    marked: [] as string[],
    commits: [] as string[][],
    events: [] as string[],
    errors: [] as unknown[],
    fail: 0,
    hold: null as Promise<void> | null,
    entered: null as ((batch: string[]) => void) | null,
  };
  const commit = async () => {
    const batch = state.marked.splice(0);
    state.events.push(`start ${batch.join(',')}`);
    state.entered?.(batch);
    if (state.hold) await state.hold;
    if (state.fail > 0) {
      state.fail--;
      state.marked.unshift(...batch); // a failed commit keeps its changes, as the branch's dirty map does
      state.events.push(`fail ${batch.join(',')}`);
      throw new Error(`commit of ${batch.join(',')} failed`);
    }
    state.commits.push(batch);
    state.events.push(`done ${batch.join(',')}`);
  };
  const flusher = new Flusher(commit, windowMs, (err) => {
    state.errors.push(err);
    state.events.push('onError');
  });
  const mark = (name: string) => {
    state.marked.push(name);
    flusher.schedule();
  };
  /** Resolves with the batch of the next commit that starts. */
  const nextStart = () => {
    const g = gate<string[]>();
    state.entered = (batch) => {
      state.entered = null;
      g.open(batch);
    };
    return g.promise;
  };
  return { state, flusher, mark, nextStart };
}

describe('Flusher', () => {
  it('turns the changes of one window into one commit, by itself', async () => {
    const { state, flusher, mark, nextStart } = fakeBranch(30);
    const held = gate();
    state.hold = held.promise;
    const started = nextStart();
    for (const name of ['a', 'b', 'c', 'd', 'e']) mark(name);
    expect(state.events).toEqual([]); // nothing before the window ends
    expect(await started).toEqual(['a', 'b', 'c', 'd', 'e']);
    await drain(); // anything else due at the end of the window runs now, while the commit is held
    held.open();
    for (let i = 0; i < 100 && !state.events.includes('done a,b,c,d,e'); i++) await drain();
    await drain();
    expect(state.events).toEqual(['start a,b,c,d,e', 'done a,b,c,d,e']); // one commit, and no other
    flusher.stop();
  });

  it('does not commit a change at once: the window stays open for more', async () => {
    const { state, flusher, mark } = fakeBranch(60_000);
    mark('a');
    await drain();
    mark('b');
    await drain();
    expect(state.events).toEqual([]);
    await flusher.flushNow();
    expect(state.commits).toEqual([['a', 'b']]);
    flusher.stop();
  });

  it('resolves flushNow only after what was marked before it is committed, without waiting for the window', async () => {
    const { state, flusher, mark } = fakeBranch(60_000);
    mark('a');
    await flusher.flushNow();
    expect(state.commits).toEqual([['a']]);
    flusher.stop();
  });

  it('queues one more commit when flushNow comes during a commit, shared by every caller', async () => {
    const { state, flusher, mark, nextStart } = fakeBranch(60_000);
    const first = gate();
    state.hold = first.promise;
    mark('a');
    let started = nextStart();
    const p1 = flusher.flushNow();
    expect(await started).toEqual(['a']);

    // 'b' arrives while the commit of 'a' is under way: that commit cannot include it.
    mark('b');
    const p2 = flusher.flushNow();
    const p3 = flusher.flushNow();
    expect(p3).toBe(p2); // one queued commit, shared
    const w1 = watch(p1);
    const w2 = watch(p2);
    await drain();
    expect([w1.settled, w2.settled]).toEqual([false, false]);

    // The first commit ends: p1 resolves, the queued commit starts with 'b', and p2 still waits for it.
    const second = gate();
    state.hold = second.promise;
    started = nextStart();
    first.open();
    await p1;
    expect(await started).toEqual(['b']);
    await drain();
    expect(w2.settled).toBe(false);
    expect(state.commits).toEqual([['a']]);

    second.open();
    await p2;
    expect(state.commits).toEqual([['a'], ['b']]);
    expect(state.events).toEqual(['start a', 'done a', 'start b', 'done b']);
    flusher.stop();
  });

  it('reports a failed commit and retries by itself, backing off, until it succeeds', async () => {
    const { state, flusher, mark } = fakeBranch(10);
    state.fail = 2;
    mark('a');
    await expect(flusher.flushNow()).rejects.toThrow('commit of a failed');
    // No one calls again: the backoff timer retries (once more failing), then succeeds.
    for (let i = 0; i < 400 && state.commits.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(state.commits).toEqual([['a']]);
    expect(state.errors.map((e) => (e as Error).message)).toEqual(['commit of a failed', 'commit of a failed']);
    expect(state.events).toEqual(['start a', 'fail a', 'onError', 'start a', 'fail a', 'onError', 'start a', 'done a']);
    flusher.stop();
  });

  it('cancels the scheduled commit on stop(), and a pending retry too; flushNow still commits', async () => {
    const { state, flusher, mark } = fakeBranch(20);
    mark('a');
    flusher.stop();
    // Many windows pass: nothing is committed.
    await new Promise((r) => setTimeout(r, 200));
    expect(state.events).toEqual([]);

    // A failure schedules a retry; stop() (shutdown) cancels it and the change waits on disk.
    state.fail = 1;
    await expect(flusher.flushNow()).rejects.toThrow();
    flusher.stop();
    await new Promise((r) => setTimeout(r, 200));
    expect(state.events).toEqual(['start a', 'fail a', 'onError']);

    await flusher.flushNow();
    expect(state.commits).toEqual([['a']]);
  });
});
