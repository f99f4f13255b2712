import fs from 'node:fs/promises';

/** A local account from /etc/passwd: what a run needs to become it (ids, home, shell). */
export interface Account {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

/** The account a user name or numeric uid names, or null when there is none. */
export async function lookupAccount(user: string): Promise<Account | null> {
  const passwd = await fs.readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of passwd.split('\n')) {
    const [name, , uid, gid, , home, shell] = line.split(':');
    if (!name || !/^\d+$/.test(uid ?? '') || !/^\d+$/.test(gid ?? '')) continue;
    if (name === user || uid === user) return { name, uid: Number(uid), gid: Number(gid), home: home || '/', shell: shell || '/bin/sh' };
  }
  return null;
}
