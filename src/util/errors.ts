import { constants } from 'node:os';

/** Errno names a filesystem operation may fail with; fuse-ops maps them to numbers in one place. */
export type ErrnoCode =
  | 'ENOENT' | 'EEXIST' | 'ENOTDIR' | 'EISDIR' | 'ENOTEMPTY' | 'EINVAL' | 'EROFS' | 'EPERM'
  | 'EACCES' | 'EDQUOT' | 'EBADF' | 'EXDEV' | 'ENAMETOOLONG' | 'EIO' | 'ENOTSUP' | 'ENOSPC' | 'ENODATA'
  | 'ELOOP' | 'EBUSY' | 'EFBIG' | 'EMFILE' | 'ENFILE' | 'ESTALE';

/** An error that carries the errno the caller of a syscall should see, and why. */
export class FsError extends Error {
  constructor(readonly code: ErrnoCode, message?: string) {
    super(message ?? code);
    this.name = 'FsError';
  }
}

export function fsError(code: ErrnoCode, message?: string): FsError {
  return new FsError(code, message);
}

/**
 * Whether err says the disk is full: Node's ENOSPC, or libgit2's (nodegit) and git's own words, which carry no
 * errno ("failed to write out file: No space left on device").
 */
export function isDiskFull(err: unknown): boolean {
  return hasCode(err, 'ENOSPC') || /No space left on device/.test(String((err as { message?: unknown } | null)?.message ?? ''));
}

/** The negative errno for any thrown value: FsError and Node's system errors keep their code, a full disk is ENOSPC, anything else is EIO. */
export function toErrno(err: unknown): number {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    const n = (constants.errno as Record<string, number>)[code];
    if (typeof n === 'number') return -n;
  }
  return isDiskFull(err) ? -constants.errno.ENOSPC : -constants.errno.EIO;
}

/** True when err is a Node system error or FsError with this code. */
export function hasCode(err: unknown, code: string): boolean {
  return (err as { code?: unknown } | null)?.code === code;
}

/** A user-facing error for the control API and CLI: a message that says what is wrong and what to do. */
export class UserError extends Error {
  constructor(message: string, readonly status = 400) {
    super(message);
    this.name = 'UserError';
  }
}
