import { constants } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fsError, hasCode } from '../../util/errors.js';

const run = promisify(execFile);
const { S_IFMT, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK, S_IFREG } = constants;
const KINDS = new Set([S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK, S_IFREG]);

/** os.mknod with no umask (the kernel applied the caller's), reporting failure as the errno name on stderr. */
const MKNOD = 'import os, sys\nos.umask(0)\ntry:\n  os.mknod(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))\n' +
  'except OSError as e:\n  sys.stderr.write(__import__("errno").errorcode.get(e.errno, "EIO")); sys.exit(1)\n';

/**
 * Make a special file (what mknod(2) asks for: a FIFO, a unix socket's inode, a device node) in the upper
 * directory. Node has no mknod, so a child process makes it (never blocking the thread that serves the
 * mount). The kernel has already refused device nodes to callers without CAP_MKNOD.
 */
export async function makeSpecial(path: string, mode: number, dev: number): Promise<void> {
  if (!KINDS.has(mode & S_IFMT)) throw fsError('EINVAL', `mknod: unknown file type ${(mode & S_IFMT).toString(8)}`);
  try {
    await run('python3', ['-c', MKNOD, path, String(mode), String(dev)]);
  } catch (e) {
    if (hasCode(e, 'ENOENT') && !(e as { stderr?: string }).stderr) throw fsError('EPERM', 'special files need python3 (apt-get install python3)');
    // The errno os.mknod met (EEXIST, ENOSPC...), passed on as a system error would be.
    const code = String((e as { stderr?: string }).stderr ?? '').trim();
    throw Object.assign(new Error(`mknod ${path}: ${code || (e as Error).message}`), { code: /^E[A-Z]+$/.test(code) ? code : 'EIO' });
  }
}
