import { createHash, randomBytes } from 'node:crypto';
import { UserError } from '../util/errors.js';
import type { WebLogin } from '../api/types.js';

/** How long a login link works, and how long a session lasts. */
const LINK_MS = 5 * 60_000;
const SESSION_MS = 12 * 3600_000;

export interface WebSession {
  /** Sent back in the X-CSRF-Token header of every state change. */
  csrf: string;
  expires: number;
}

const hash = (token: string) => createHash('sha256').update(token).digest('hex');

/**
 * The web page's logins: the owner credential (through `nas web open`) buys a one-time link, the link buys a
 * session cookie. Only hashes of links and session ids are kept, in memory: a restart logs everyone out.
 */
export class WebLogins {
  private readonly links = new Map<string, number>();
  private readonly sessions = new Map<string, WebSession>();
  /** The page's address once it listens (null: not served). */
  base: string | null = null;

  /** A one-time login link (owner only). */
  login(): WebLogin {
    if (!this.base) throw new UserError('nasd does not serve the web page (web_listen is off, or its address was taken: see nasd\'s log)', 409);
    this.sweep();
    const token = randomBytes(32).toString('base64url');
    const expires = Date.now() + LINK_MS;
    this.links.set(hash(token), expires);
    return { url: `${this.base}/login?token=${token}`, expires: new Date(expires).toISOString() };
  }

  /** Spend a link: a new session (its id goes into the cookie), or null when the link is unknown, used or old. */
  redeem(token: string): { id: string; session: WebSession } | null {
    const key = hash(token);
    const expires = this.links.get(key);
    this.links.delete(key);
    if (expires === undefined || expires < Date.now()) return null;
    const id = randomBytes(32).toString('base64url');
    const session = { csrf: randomBytes(24).toString('base64url'), expires: Date.now() + SESSION_MS };
    this.sessions.set(hash(id), session);
    return { id, session };
  }

  session(id: string | undefined): WebSession | null {
    if (!id) return null;
    const s = this.sessions.get(hash(id));
    if (!s || s.expires < Date.now()) return null;
    return s;
  }

  logout(id: string | undefined): void {
    if (id) this.sessions.delete(hash(id));
  }

  get sessionSeconds(): number {
    return SESSION_MS / 1000;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [k, t] of this.links) if (t < now) this.links.delete(k);
    for (const [k, s] of this.sessions) if (s.expires < now) this.sessions.delete(k);
  }
}
