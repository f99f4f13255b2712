import fs from 'node:fs';
import { promisify } from 'node:util';
import { sys } from '../util/sys.js';

/**
 * fs calls on raw descriptors and paths of the upper directory, as promises (no FileHandle objects on the hot
 * path). Made synchronously: a file of nasd's own disk answers in microseconds, where a trip through libuv's
 * thread pool costs 100-300 us here, several times per request. Never for a path inside the mount (nasd would wait
 * on itself); FIFOs and devices are opened by the kernel itself, never by a request to nasd. fsync stays
 * asynchronous: it may take long, and other requests go on meanwhile.
 */
function now<A extends unknown[], R>(call: (...args: A) => R): (...args: A) => Promise<R> {
  return (...args: A) => {
    try {
      return Promise.resolve(call(...args));
    } catch (err) {
      return Promise.reject(err);
    }
  };
}

export const open = now((path: string, flags: number, mode?: number): number => fs.openSync(path, flags, mode));
export const close = now((fd: number): void => fs.closeSync(fd));
export const ftruncate = now((fd: number, len: number): void => fs.ftruncateSync(fd, len));
export const fsync = promisify(fs.fsync);
export const fchown = now((fd: number, uid: number, gid: number): void => fs.fchownSync(fd, uid, gid));
export const fchmod = now((fd: number, mode: number): void => fs.fchmodSync(fd, mode));
export const fstat = now((fd: number): fs.BigIntStats => fs.fstatSync(fd, { bigint: true }));
export const read = now((fd: number, buf: Buffer, len: number, pos: number): number => fs.readSync(fd, buf, 0, len, pos));
export const write = now((fd: number, buf: Buffer, len: number, pos: number): number => fs.writeSync(fd, buf, 0, len, pos));
/** An upper path's own entry (a link is not followed); with nanosecond times when `ns`. */
export const lstat = now((path: string): fs.Stats => fs.lstatSync(path));
export const lstatNs = now((path: string): fs.BigIntStats => fs.lstatSync(path, { bigint: true }));

/** A time for setTimes: nanoseconds since the epoch, the current time, or "leave it". */
export type NsTime = bigint | 'now' | 'omit';

/**
 * Set a file's (or symlink's) times on disk with nanoseconds, through our binding (Node's utimes keeps
 * microseconds). One synchronous syscall on a file of the upper directory: never a path inside the mount.
 */
export function setTimes(path: string, atime: NsTime, mtime: NsTime): void {
  sys().lutimens(path, atime, mtime);
}
