import fs from 'node:fs';
import { promisify } from 'node:util';

/** Callback-style fs calls as promises on raw descriptors: no FileHandle objects on the hot path. */
export const open = promisify(fs.open) as (path: string, flags: number, mode?: number) => Promise<number>;
export const close = promisify(fs.close);
export const ftruncate = promisify(fs.ftruncate) as (fd: number, len: number) => Promise<void>;
export const fsync = promisify(fs.fsync);

export function read(fd: number, buf: Buffer, len: number, pos: number): Promise<number> {
  return new Promise((resolve, reject) => fs.read(fd, buf, 0, len, pos, (err, n) => (err ? reject(err) : resolve(n))));
}

export function write(fd: number, buf: Buffer, len: number, pos: number): Promise<number> {
  return new Promise((resolve, reject) => fs.write(fd, buf, 0, len, pos, (err, n) => (err ? reject(err) : resolve(n))));
}
