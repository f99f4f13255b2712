import fs from 'node:fs/promises';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import { hasCode } from '../util/errors.js';
import { ownerTokenPath, type Credentials } from '../api/credentials.js';

/** The owner credential, created on first start. */
export async function loadOwnerToken(stateDir: string): Promise<string> {
  const file = ownerTokenPath(stateDir);
  try {
    const token = (await fs.readFile(file, 'utf8')).trim();
    if (token.length >= 32) return token;
  } catch (e) {
    if (!hasCode(e, 'ENOENT')) throw e;
  }
  const token = randomBytes(32).toString('base64url');
  await fs.writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}

export function credentialsOf(req: http.IncomingMessage, ownerToken: string): Credentials {
  const header = (name: string) => {
    const v = req.headers[name];
    return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
  };
  const owner = header('x-nas-owner');
  const a = Buffer.from(owner ?? '');
  const b = Buffer.from(ownerToken);
  return { owner: a.length === b.length && timingSafeEqual(a, b), lease: header('x-nas-lease') };
}
