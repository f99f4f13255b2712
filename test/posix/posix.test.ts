import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TestDaemon, eventually, removeTree, run } from '../helpers.js';
import { Differs, TWIN, type PosixCase, type Target } from './case.js';
import { CASES } from './cases.js';
import { NeedsMount, nodeSys, pathPlace, type Place, type Sys } from './sys.js';
import { IN_PROCESS_ROOT, ViewSys, inProcessPlace, openInProcessView } from './in-process.js';

/**
 * The POSIX cases of cases.ts on every target: a native directory (the baseline); through the mount, the
 * places a Home offers (a branch's versioned folder, its workspace/, a folder its .gitignore ignores, and
 * main); and in process, a branch view called directly with no mount, so that the cases also run where
 * there is no FUSE. One daemon and one in-process view for the suite.
 */

const BRANCH = 'posix';
/** The principal of the write lease the mount's branch holds: the other user the owner cases act as. */
const LEASED = '65534';
const FUSE = existsSync('/dev/fuse');
const slug = (c: PosixCase) => c.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
const isErrno = (code: string) => /^E[A-Z]+$/.test(code);

/** What a case must give on a target: native is the baseline; main refuses every mutation. */
function expected(c: PosixCase, t: Target): string {
  const twin = TWIN[t];
  const declared = c.expect?.[t] ?? (twin ? c.expect?.[twin] : undefined);
  if (declared) return declared;
  if (t === 'main' && c.mutates !== false) return 'EROFS';
  return 'OK';
}

/** What some calls gave: 'OK', an errno code or the name of the check that did not hold, and the detail. */
async function outcome(calls: () => Promise<void>): Promise<{ code: string; detail: string }> {
  try {
    await calls();
    return { code: 'OK', detail: '' };
  } catch (e) {
    if (e instanceof Differs) return { code: e.code, detail: e.message };
    if (e instanceof NeedsMount) throw e; // not an outcome: a case to declare mountOnly
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && isErrno(code)) return { code, detail: (e as Error).message };
    throw e; // not an outcome: a broken case
  }
}

/** Every case on one target, each in a fresh directory under the target's root. */
function suite(target: Target, where: () => { root: string; fs: Sys; place: Place }): void {
  describe(target, () => {
    for (const c of CASES) {
      if (TWIN[target] && c.mountOnly) {
        it.skip(`${c.name} (mount only: ${c.mountOnly})`, () => undefined);
        continue;
      }
      it(c.name, async () => {
        const { root, fs: sys, place } = where();
        const dir = `${root}/${slug(c)}`;
        if (target !== 'main') {
          await sys.mkdir(dir);
          await c.setup?.(dir, sys);
        }
        const want = expected(c, target);
        const got = await outcome(() => c.run(dir, sys, place));
        expect(got.code, `${want === 'OK' ? 'should behave as natively' : `declared: ${c.why}`}; got: ${got.detail}`).toBe(want);
        if (c.afterRefusal && isErrno(want)) {
          const after = await outcome(() => c.afterRefusal!(dir, sys));
          expect(after.code, `after the refusal (${want}): ${after.detail}`).toBe('OK');
        }
      });
    }
  });
}

describe('POSIX cases', () => {
  describe('on a native directory (the baseline)', () => {
    let native: string;
    beforeAll(async () => {
      native = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-posix-'));
      // Other users reach it, as they reach the mount (the owner cases act as them).
      await fs.chmod(native, 0o755);
    });
    afterAll(async () => {
      if (native) await removeTree(native);
    });
    suite('native', () => ({ root: native, fs: nodeSys, place: pathPlace }));
  });

  describe.skipIf(!FUSE)('through the mount: a branch (versioned, workspace/, ignored) and main', () => {
    let d: TestDaemon;
    const roots: Record<'versioned' | 'workspace' | 'ignored' | 'main', () => string> = {
      versioned: () => d.path(`demo@${BRANCH}`, 'outbox'),
      workspace: () => d.path(`demo@${BRANCH}`, 'workspace'),
      // The template's .gitignore names node_modules/: scratch that nasd serves (workspace/ is a bind mount).
      ignored: () => d.path(`demo@${BRANCH}`, 'node_modules'),
      main: () => d.path('demo', 'outbox'),
    };

    beforeAll(async () => {
      d = await TestDaemon.start({ extraArgs: ['--demo'] });
      await fs.chmod(d.dir, 0o755);
      const r = await d.nas('branch', 'create', `demo/${BRANCH}`);
      expect(r.code, r.stderr).toBe(0);
      // Only root, the owner and principals of leases in force change a branch: the other user the cases act as holds one.
      await d.nasJson('lease', 'issue', `demo/${BRANCH}`, '--principal', LEASED);
      await fs.mkdir(roots.ignored());
      // Main's fixtures: each case's setup run natively, then pushed by the owner with plain git (main is
      // protected from views, not from its owner). `.keep` keeps a directory git would otherwise drop.
      const work = `${d.dir}/main-clone`;
      const git = (...args: string[]) => run('git', ['-c', 'user.name=op', '-c', 'user.email=op@x', ...args], { cwd: work, env: { NAS_OPERATOR_PUSH: '1' } });
      expect((await run('git', ['clone', '-q', `${d.state}/homes/demo.git`, work])).code).toBe(0);
      for (const c of CASES) {
        const dir = `${work}/outbox/${slug(c)}`;
        await fs.mkdir(dir, { recursive: true });
        await c.setup?.(dir, nodeSys);
        await fs.writeFile(`${dir}/.keep`, '');
      }
      for (const step of [['add', '-A'], ['commit', '-qm', 'owner: POSIX fixtures'], ['push', '-q', 'origin', 'main']]) {
        const g = await git(...step);
        expect(g.code, g.stderr).toBe(0);
      }
      await removeTree(work);
      const last = d.path('demo', `outbox/${slug(CASES[CASES.length - 1])}`);
      await eventually(async () => (await fs.stat(last).catch(() => null)) !== null, 'main to show the fixtures');
    });
    afterAll(async () => {
      await d?.cleanup();
    });

    for (const target of ['versioned', 'workspace', 'ignored', 'main'] as const) {
      suite(target, () => ({ root: roots[target](), fs: nodeSys, place: pathPlace }));
    }
  });

  describe('in process: a branch view called directly, no mount (versioned, ignored)', () => {
    let opened: Awaited<ReturnType<typeof openInProcessView>> | undefined;
    let sys: ViewSys;
    beforeAll(async () => {
      opened = await openInProcessView();
      sys = new ViewSys(opened.view);
      await sys.mkdir(`${IN_PROCESS_ROOT}/node_modules`);
    });
    afterAll(async () => {
      await opened?.close();
    });
    suite('in-process', () => ({ root: `${IN_PROCESS_ROOT}/outbox`, fs: sys, place: inProcessPlace(sys) }));
    suite('in-process-ignored', () => ({ root: `${IN_PROCESS_ROOT}/node_modules`, fs: sys, place: inProcessPlace(sys) }));
  });

  it('declares every difference with a reason, none for the native baseline, and why a case needs the mount', () => {
    for (const c of CASES) {
      if (c.expect) expect(c.why, c.name).toMatch(/\w/);
      if (c.afterRefusal) expect(c.expect !== undefined || c.mutates !== false, `${c.name}: afterRefusal, but no target refuses it`).toBe(true);
      if (c.mountOnly !== undefined) expect(c.mountOnly, c.name).toMatch(/\w/);
      expect(c.expect?.native, c.name).toBeUndefined();
    }
    expect(new Set(CASES.map(slug)).size).toBe(CASES.length);
  });
});
