import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import fs from 'node:fs/promises';
import { constants } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
// The one place that names BranchView's module (it is moving to src/cow/branch/branch-view.ts).
import { BranchView, type BranchContext } from '../../src/cow/branch/branch-view.js';
import type { Handle } from '../../src/cow/view.js';
import { MODE, Store, type Entry } from '../../src/store/store.js';
import { Trash } from '../../src/trash/trash.js';
import { compileRules } from '../../src/policy/policy.js';
import { run } from '../helpers.js';

/**
 * BranchView without FUSE: the calls the kernel would make (open, create, write, release, rename, unlink...)
 * made directly, over a real Store (a bare repository) and a real recycle area. The commit window is a
 * minute, so commits come only from sync(): every test decides when a commit happens.
 */

const identity = { name: 'nasd', email: 'nasd@localhost' };
const log = pino({ level: 'silent' });
const HEAD_FILES: Record<string, string> = {
  'AGENTS.md': '# demo\n\nRead memory/MEMORY.md first.\n',
  'inbox/README.md': 'Untrusted input lands here.\n',
  'memory/journal/2026.md': 'first\n',
  'outbox/keep.md': 'keep\n',
};
const { O_RDONLY, O_WRONLY, O_APPEND, O_TRUNC } = constants;

/**
 * A Store whose commitChanges (a branch commit: tree, commit object, ref) can be held: `hold()` makes the
 * next one announce itself and wait until released, which puts a test in the middle of a commit for certain.
 */
function holdableStore(store: Store) {
  type Held = 'commitChanges' | 'readBlob';
  let held: { method: Held; entered: () => void; released: Promise<void> } | null = null;
  const proxy = new Proxy(store, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      if (prop === 'commitChanges' || prop === 'readBlob') {
        return async (...args: unknown[]) => {
          const h = held?.method === prop ? held : null;
          if (h) {
            held = null;
            h.entered();
            await h.released;
          }
          return v.apply(target, args);
        };
      }
      return v.bind(target);
    },
  });
  const hold = (method: Held = 'commitChanges') => {
    let entered!: () => void;
    let release!: () => void;
    const inCommit = new Promise<void>((r) => (entered = r));
    held = { method, entered, released: new Promise<void>((r) => (release = r)) };
    return { inCommit, release };
  };
  return { store: proxy, hold };
}

describe('BranchView (no mount)', () => {
  let tmp: string;
  let gitDir: string;
  let store: Store;
  let trash: Trash;
  let holdCommit: ReturnType<typeof holdableStore>['hold'];
  const views: BranchView[] = [];

  const git = async (...args: string[]) => {
    const r = await run('git', [`--git-dir=${gitDir}`, ...args]);
    if (r.code !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const tree = async (branch = 'draft') => (await git('ls-tree', '-r', '--name-only', branch)).trim().split('\n');
  const blob = (rev: string) => git('cat-file', 'blob', rev);
  const branchDir = (branch: string) => `${tmp}/branches/${branch}`;

  /** A branch whose head commit holds HEAD_FILES, made with the Store's own calls. */
  async function makeBranch(branch: string): Promise<void> {
    const changes = new Map<string, Entry>();
    for (const [rel, text] of Object.entries(HEAD_FILES)) changes.set(rel, { oid: await store.writeBlob(text), mode: MODE.file });
    const treeOid = await store.editTree(null, changes);
    const commit = await store.writeCommit({ tree: treeOid, parents: [], message: 'template\n', author: identity });
    await store.updateRef(`refs/heads/${branch}`, commit, null, 'test: create branch');
  }

  async function openView(branch = 'draft', over: Partial<BranchContext> = {}): Promise<BranchView> {
    const ctx: BranchContext = {
      role: 'demo', branch, store, trash, identity, owner: { uid: 0, gid: 0 }, rules: compileRules(), quotaBytes: 1 << 30,
      dir: branchDir(branch), windowMs: 60_000, log, ...over,
    };
    const view = await BranchView.open(ctx, ['workspace']);
    views.push(view);
    return view;
  }

  async function closeView(view: BranchView): Promise<void> {
    views.splice(views.indexOf(view), 1);
    await view.close();
  }

  async function writeNew(view: BranchView, rel: string, data: string | Buffer): Promise<void> {
    const buf = Buffer.from(data);
    const h = await view.create(rel, 0o644);
    expect(await view.write(h, buf, buf.length, 0)).toBe(buf.length);
    await view.release(h);
  }

  async function readAll(view: BranchView, rel: string): Promise<string> {
    const h = await view.open(rel, O_RDONLY);
    const buf = Buffer.alloc(1 << 16);
    const n = await view.read(h, buf, buf.length, 0);
    await view.release(h);
    return buf.subarray(0, n).toString();
  }

  const upperHas = (branch: string, rel: string) => fs.lstat(`${branchDir(branch)}/upper/${rel}`).then(() => true, () => false);

  beforeEach(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-bv-'));
    gitDir = `${tmp}/demo.git`;
    const held = holdableStore(await Store.init(gitDir));
    store = held.store;
    holdCommit = held.hold;
    trash = new Trash(store, identity);
    await makeBranch('draft');
  });

  afterEach(async () => {
    // Close every view (its timer and its open log), even when the test failed half-way.
    for (const v of views.splice(0)) await v.close().catch(() => undefined);
    await fs.rm(tmp, { recursive: true, force: true });
  });

  it('turns a file created and released into a commit on sync()', async () => {
    const view = await openView();
    await writeNew(view, 'outbox/x.md', 'hi\n');
    expect(await tree()).not.toContain('outbox/x.md'); // the window is a minute: nothing yet
    await view.sync();
    expect(await blob('draft:outbox/x.md')).toBe('hi\n');
    const message = await git('log', '-1', '--format=%B', 'draft');
    expect(message).toContain('nasd: write outbox/x.md');
    expect(message).toContain('Nas-Branch: draft');
    expect(view.pendingChanges).toBe(0);
  });

  it('serves an unchanged git file without copying it up', async () => {
    const view = await openView();
    expect(await readAll(view, 'AGENTS.md')).toBe(HEAD_FILES['AGENTS.md']);
    expect((await view.getattr('AGENTS.md')).size).toBe(Buffer.byteLength(HEAD_FILES['AGENTS.md']));
    expect((await view.readdir('')).sort()).toEqual(['AGENTS.md', 'inbox', 'memory', 'outbox', 'workspace']);
    expect(await upperHas('draft', 'AGENTS.md')).toBe(false);
  });

  it('copies a git file up on open for write and keeps its content', async () => {
    const view = await openView();
    const h = await view.open('AGENTS.md', O_WRONLY);
    expect(await upperHas('draft', 'AGENTS.md')).toBe(true);
    const more = Buffer.from('One more rule.\n');
    const end = Buffer.byteLength(HEAD_FILES['AGENTS.md']);
    await view.write(h, more, more.length, end);
    await view.release(h);
    await view.sync();
    expect(await blob('draft:AGENTS.md')).toBe(`${HEAD_FILES['AGENTS.md']}One more rule.\n`);
  });

  it('sends unlinked files to the recycle area: committed, uncommitted and git-only alike, but for the transient', async () => {
    const view = await openView();
    await writeNew(view, 'outbox/committed.md', 'was committed\n');
    await view.sync();
    await view.unlink('outbox/committed.md');
    await writeNew(view, 'outbox/fresh.md', 'never committed\n');
    // Made and deleted at once, never committed (a tool's temporary file): nothing to file.
    await writeNew(view, 'outbox/blip.md', 'a moment\n');
    await view.unlink('outbox/blip.md');
    // Older than 250 ms: filed, committed or not.
    await new Promise((r) => setTimeout(r, 1100));
    await view.unlink('outbox/fresh.md');
    await view.unlink('inbox/README.md');
    await view.sync();

    const files = await tree();
    for (const gone of ['outbox/committed.md', 'outbox/fresh.md', 'outbox/blip.md', 'inbox/README.md']) expect(files).not.toContain(gone);
    const records = await trash.list();
    const byPath = new Map(records.map((r) => [r.path, r]));
    expect([...byPath.keys()].sort()).toEqual(['inbox/README.md', 'outbox/committed.md', 'outbox/fresh.md']);
    for (const r of records) expect(r).toMatchObject({ branch: 'draft', kind: 'file' });
    expect((await trash.content(byPath.get('outbox/committed.md')!)).toString()).toBe('was committed\n');
    expect((await trash.content(byPath.get('outbox/fresh.md')!)).toString()).toBe('never committed\n');
    expect((await trash.content(byPath.get('inbox/README.md')!)).toString()).toBe(HEAD_FILES['inbox/README.md']);
    await expect(view.getattr('inbox/README.md')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('never commits scratch paths (workspace/)', async () => {
    const view = await openView();
    await view.mkdir('workspace/build', 0o755);
    await writeNew(view, 'workspace/build/out.bin', 'scratch\n');
    await writeNew(view, 'outbox/real.md', 'versioned\n');
    await view.sync();
    const files = await tree();
    expect(files).toContain('outbox/real.md');
    expect(files.filter((f) => f.startsWith('workspace'))).toEqual([]);
    expect(await readAll(view, 'workspace/build/out.bin')).toBe('scratch\n');
    // Deleting scratch does not reach the recycle area either.
    await view.unlink('workspace/build/out.bin');
    await view.sync();
    expect(await trash.list()).toEqual([]);
  });

  it('commits a renamed file under its new name only', async () => {
    const view = await openView();
    await writeNew(view, 'outbox/a.md', 'a\n');
    await view.sync();
    await view.rename('outbox/a.md', 'outbox/b.md');
    await view.rename('outbox/keep.md', 'outbox/kept.md'); // a file that exists only in git
    await view.sync();
    const files = await tree();
    expect(files).toEqual(expect.arrayContaining(['outbox/b.md', 'outbox/kept.md']));
    expect(files).not.toContain('outbox/a.md');
    expect(files).not.toContain('outbox/keep.md');
    expect(await blob('draft:outbox/b.md')).toBe('a\n');
    expect(await blob('draft:outbox/kept.md')).toBe('keep\n');
  });

  it('refuses to open the append-only journal for writing without O_APPEND (EPERM)', async () => {
    const view = await openView();
    const j = 'memory/journal/2026.md';
    await expect(view.open(j, O_WRONLY)).rejects.toMatchObject({ code: 'EPERM' });
    await expect(view.open(j, O_WRONLY | O_APPEND | O_TRUNC)).rejects.toMatchObject({ code: 'EPERM' });
    const h = await view.open(j, O_WRONLY | O_APPEND);
    const line = Buffer.from('second\n');
    // Below the size it had when opened is refused; at its end is an append.
    await expect(view.write(h, line, line.length, 0)).rejects.toMatchObject({ code: 'EPERM' });
    await view.write(h, line, line.length, h.size);
    await view.release(h);
    await view.sync();
    expect(await blob(`draft:${j}`)).toBe('first\nsecond\n');
  });

  it('refuses a write past the quota with EDQUOT and keeps what fit', async () => {
    await makeBranch('small');
    const view = await openView('small', { quotaBytes: 1000 });
    const h: Handle = await view.create('outbox/big.bin', 0o644);
    const chunk = Buffer.alloc(600, 1);
    await view.write(h, chunk, chunk.length, 0);
    await expect(view.write(h, chunk, chunk.length, 600)).rejects.toMatchObject({ code: 'EDQUOT' });
    await view.release(h);
    expect(view.quota).toEqual({ used: 600, limit: 1000 });
    await view.sync();
    expect((await git('cat-file', '-s', 'small:outbox/big.bin')).trim()).toBe('600');
  });

  it('recovers upper files left uncommitted when it is opened again (crash recovery)', async () => {
    const first = await openView();
    await closeView(first);
    // What a daemon killed before its commit leaves: a file in the upper directory that git does not have.
    await fs.mkdir(`${branchDir('draft')}/upper/outbox`, { recursive: true });
    await fs.writeFile(`${branchDir('draft')}/upper/outbox/recovered.md`, 'from before the crash\n');
    expect(await tree()).not.toContain('outbox/recovered.md');
    const view = await openView();
    await view.sync();
    expect(await blob('draft:outbox/recovered.md')).toBe('from before the crash\n');
  });

  it('does not bring back a file renamed while the commit adding it is under way', async () => {
    const view = await openView();
    await writeNew(view, 'outbox/f.tmp', 'draft\n');
    const held = holdCommit();
    let synced = false;
    const syncing = view.sync().then(() => (synced = true));
    await held.inCommit; // the commit has hashed outbox/f.tmp and is writing its commit object: hold it there
    await view.rename('outbox/f.tmp', 'outbox/f.md');
    expect(synced).toBe(false);
    held.release();
    await syncing;
    // The commit under way did add the old name: the race really happened.
    expect(await tree()).toContain('outbox/f.tmp');
    await view.sync();
    const files = await tree();
    expect(files).toContain('outbox/f.md');
    expect(files).not.toContain('outbox/f.tmp');
    expect(await blob('draft:outbox/f.md')).toBe('draft\n');
    await expect(view.getattr('outbox/f.tmp')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('does not commit a temp file renamed while the commit that takes it starts (rsync, editors)', async () => {
    const view = await openView();
    await writeNew(view, 'outbox/.f.md.XyZ123', 'draft\n');
    // Hold the rename after it hid git's copy of the source and before the file moves: a commit starts there
    // and reads the source still at its old name.
    let entered!: () => void;
    let go!: () => void;
    const inRename = new Promise<void>((r) => (entered = r));
    const gate = new Promise<void>((r) => (go = r));
    const real = fs.rename;
    const spy = vi.spyOn(fs, 'rename').mockImplementation(async (a, b) => {
      if (String(a).endsWith('.f.md.XyZ123')) {
        entered();
        await gate;
      }
      return real(a, b);
    });
    try {
      const renaming = view.rename('outbox/.f.md.XyZ123', 'outbox/f.md');
      await inRename;
      await view.sync();
      go();
      await renaming;
    } finally {
      spy.mockRestore();
    }
    await view.sync();
    const files = await tree();
    expect(files).toContain('outbox/f.md');
    expect(files).not.toContain('outbox/.f.md.XyZ123');
    expect(await blob('draft:outbox/f.md')).toBe('draft\n');
  });

  it('does not bring back a file deleted while a write was copying it up', async () => {
    const view = await openView();
    const held = holdCommit('readBlob');
    const opening = view.open('outbox/keep.md', O_WRONLY | O_APPEND).then(
      (h) => ({ ok: true as const, h }),
      (err: { code?: string }) => ({ ok: false as const, code: err.code }),
    );
    await held.inCommit; // the copy-up is reading git's copy
    await view.unlink('outbox/keep.md');
    held.release();
    const opened = await opening;
    if (opened.ok) await view.release(opened.h);
    expect(opened).toMatchObject({ ok: false, code: 'ENOENT' });
    await expect(view.getattr('outbox/keep.md')).rejects.toMatchObject({ code: 'ENOENT' });
    await view.sync();
    expect(await tree()).not.toContain('outbox/keep.md');
    expect(await upperHas('draft', 'outbox/keep.md')).toBe(false);
  });
});
