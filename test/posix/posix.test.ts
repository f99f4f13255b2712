import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TestDaemon, eventually, removeTree, run } from '../helpers.js';
import { CASES, Differs, type PosixCase, type Target } from './cases.js';

/**
 * The POSIX cases of cases.ts against a native directory and the three kinds of place a Home offers:
 * a branch's versioned folder, its workspace/ (scratch) and main (read-only). One daemon for the suite.
 */

const TARGETS: Target[] = ['native', 'versioned', 'workspace', 'main'];
const BRANCH = 'posix';
const slug = (c: PosixCase) => c.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');

/** What a case must give on a target: native is the baseline; main refuses every mutation. */
function expected(c: PosixCase, t: Target): string {
  if (c.expect?.[t]) return c.expect[t]!;
  if (t === 'main' && c.mutates !== false) return 'EROFS';
  return 'OK';
}

/** What a case gave: 'OK', an errno code or the name of the check that did not hold, and the detail. */
async function outcome(c: PosixCase, dir: string): Promise<{ code: string; detail: string }> {
  try {
    await c.run(dir);
    return { code: 'OK', detail: '' };
  } catch (e) {
    if (e instanceof Differs) return { code: e.code, detail: e.message };
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return { code, detail: (e as Error).message };
    throw e; // not an outcome: a broken case
  }
}

describe('POSIX cases: native directory, versioned folder, workspace/, main', () => {
  let d: TestDaemon;
  let native: string;
  const root: Record<Target, () => string> = {
    native: () => native,
    versioned: () => d.path(`demo@${BRANCH}`, 'outbox'),
    workspace: () => d.path(`demo@${BRANCH}`, 'workspace'),
    main: () => d.path('demo', 'outbox'),
  };

  beforeAll(async () => {
    native = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-posix-'));
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    const r = await d.nas('branch', 'create', `demo/${BRANCH}`);
    expect(r.code, r.stderr).toBe(0);
    // Main's fixtures: each case's setup run natively, then pushed by the owner with plain git (main is
    // protected from views, not from its owner). `.keep` keeps a directory git would otherwise drop.
    const work = `${native}/.main-clone`;
    const git = (...args: string[]) => run('git', ['-c', 'user.name=op', '-c', 'user.email=op@x', ...args], { cwd: work, env: { NAS_OPERATOR_PUSH: '1' } });
    expect((await run('git', ['clone', '-q', `${d.state}/homes/demo.git`, work])).code).toBe(0);
    for (const c of CASES) {
      const dir = `${work}/outbox/${slug(c)}`;
      await fs.mkdir(dir, { recursive: true });
      await c.setup?.(dir);
      await fs.writeFile(`${dir}/.keep`, '');
    }
    for (const step of [['add', '-A'], ['commit', '-qm', 'owner: POSIX fixtures'], ['push', '-q', 'origin', 'main']]) {
      const g = await git(...step);
      expect(g.code, g.stderr).toBe(0);
    }
    await fs.rm(work, { recursive: true, force: true });
    const last = d.path('demo', `outbox/${slug(CASES[CASES.length - 1])}`);
    await eventually(async () => (await fs.stat(last).catch(() => null)) !== null, 'main to show the fixtures');
  });
  afterAll(async () => {
    await d?.cleanup();
    if (native) await removeTree(native);
  });

  for (const target of TARGETS) {
    describe(target, () => {
      for (const c of CASES) {
        it(c.name, async () => {
          const dir = `${root[target]()}/${slug(c)}`;
          if (target !== 'main') {
            await fs.mkdir(dir);
            await c.setup?.(dir);
          }
          const want = expected(c, target);
          const got = await outcome(c, dir);
          expect(got.code, `${want === 'OK' ? 'should behave as natively' : `declared: ${c.why}`}; got: ${got.detail}`).toBe(want);
        });
      }
    });
  }

  it('declares every difference with a reason, and none for the native baseline', () => {
    for (const c of CASES) {
      if (c.expect) expect(c.why, c.name).toMatch(/\w/);
      expect(c.expect?.native, c.name).toBeUndefined();
    }
    expect(new Set(CASES.map(slug)).size).toBe(CASES.length);
  });
});
