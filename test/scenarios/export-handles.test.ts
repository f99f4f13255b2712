import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ROOT, TestDaemon, exec } from '../helpers.js';

/**
 * NFS export readiness (FUSE_CAP_EXPORT_SUPPORT): a file handle names a node by id, and the kernel asks for it by
 * id long after it forgot the name (the NFS server does; so does open_by_handle_at, used here, the kernel having
 * no NFS server module). nasd keeps forgotten nodes' names, so the id still finds the file.
 */
describe('file handles (NFS export readiness)', () => {
  let d: TestDaemon;
  let tool: string;

  beforeAll(async () => {
    d = await TestDaemon.withBranch('x');
    tool = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'nas-by-handle-')), 'by-handle');
    await exec('cc', ['-O2', '-o', tool, `${ROOT}/test/fixtures/by-handle.c`]);
  });
  afterAll(async () => {
    await d?.cleanup();
    if (tool) await fs.rm(path.dirname(tool), { recursive: true, force: true });
  });

  it('opens a file of main and of a branch by its handle, also after the kernel dropped its dentries and inodes', async () => {
    await fs.writeFile(d.path('demo@x', 'outbox/h.txt'), 'by handle\n');
    for (const [file, want] of [[d.path('demo@x', 'outbox/h.txt'), 'by handle\n'], [d.path('demo', 'AGENTS.md'), '# demo\n']]) {
      const warm = await exec(tool, [d.mnt, file]);
      expect(warm.stdout.startsWith(want)).toBe(true);
      const cold = await exec(tool, [d.mnt, file, '--drop']);
      expect(cold.stdout.startsWith(want)).toBe(true);
    }
  });
});
