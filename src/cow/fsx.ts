import fs from 'node:fs';
import { promisify } from 'node:util';
import { binding } from '../util/addon.js';

/** Callback-style fs calls as promises on raw descriptors: no FileHandle objects on the hot path. */
export const open = promisify(fs.open) as (path: string, flags: number, mode?: number) => Promise<number>;
export const close = promisify(fs.close);
export const ftruncate = promisify(fs.ftruncate) as (fd: number, len: number) => Promise<void>;
export const fsync = promisify(fs.fsync);
export const fchown = promisify(fs.fchown);
export const fchmod = promisify(fs.fchmod) as (fd: number, mode: number) => Promise<void>;
export const fstat = (fd: number): Promise<fs.BigIntStats> =>
  new Promise((resolve, reject) => fs.fstat(fd, { bigint: true }, (err, st) => (err ? reject(err) : resolve(st))));

export function read(fd: number, buf: Buffer, len: number, pos: number): Promise<number> {
  return new Promise((resolve, reject) => fs.read(fd, buf, 0, len, pos, (err, n) => (err ? reject(err) : resolve(n))));
}

export function write(fd: number, buf: Buffer, len: number, pos: number): Promise<number> {
  return new Promise((resolve, reject) => fs.write(fd, buf, 0, len, pos, (err, n) => (err ? reject(err) : resolve(n))));
}

/** A time for setTimes: nanoseconds since the epoch, the current time, or "leave it". */
export type NsTime = bigint | 'now' | 'omit';

/**
 * Set a file's (or symlink's) times on disk with nanoseconds, through our binding (Node's utimes keeps
 * microseconds). One synchronous syscall on a file of the upper directory: never a path inside the mount.
 */
export function setTimes(path: string, atime: NsTime, mtime: NsTime): void {
  binding().lutimens(path, atime, mtime);
}
