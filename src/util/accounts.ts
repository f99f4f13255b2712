import fs from 'node:fs/promises';

/** A local account from /etc/passwd: what a run needs to become it (ids, home, shell). */
export interface Account {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

/** The local accounts, in /etc/passwd order. */
async function accounts(): Promise<Account[]> {
  const passwd = await fs.readFile('/etc/passwd', 'utf8').catch(() => '');
  const out: Account[] = [];
  for (const line of passwd.split('\n')) {
    const [name, , uid, gid, , home, shell] = line.split(':');
    if (!name || !/^\d+$/.test(uid ?? '') || !/^\d+$/.test(gid ?? '')) continue;
    out.push({ name, uid: Number(uid), gid: Number(gid), home: home || '/', shell: shell || '/bin/sh' });
  }
  return out;
}

/** The account a user name or numeric uid names, or null when there is none. */
export async function lookupAccount(user: string): Promise<Account | null> {
  return (await accounts()).find((a) => a.name === user || String(a.uid) === user) ?? null;
}

/** How a commit names the accounts that made its changes: `root (uid 0)`, or `uid 4242` for one without a name. */
export async function describeUids(uids: Iterable<number>): Promise<string[]> {
  const list = [...uids];
  if (list.length === 0) return [];
  const names = new Map((await accounts()).reverse().map((a) => [a.uid, a.name]));
  return list.sort((a, b) => a - b).map((uid) => (names.has(uid) ? `${names.get(uid)} (uid ${uid})` : `uid ${uid}`));
}

/** How a person reads an owner and a group: the account's and group's names where /etc/passwd and /etc/group know them, else the number. */
export async function idNames(): Promise<{ user(uid: number): string; group(gid: number): string }> {
  const users = new Map((await accounts()).reverse().map((a) => [a.uid, a.name]));
  const groups = new Map<number, string>();
  for (const line of (await fs.readFile('/etc/group', 'utf8').catch(() => '')).split('\n').reverse()) {
    const [name, , gid] = line.split(':');
    if (name && /^\d+$/.test(gid ?? '')) groups.set(Number(gid), name);
  }
  return { user: (uid) => users.get(uid) ?? String(uid), group: (gid) => groups.get(gid) ?? String(gid) };
}

/** The groups a process of this account is in, as `--init-groups` sets them: its primary group and each /etc/group line that lists it. */
export async function groupsOf(account: { name: string; gid: number }): Promise<number[]> {
  const text = await fs.readFile('/etc/group', 'utf8').catch(() => '');
  const gids = new Set([account.gid]);
  for (const line of text.split('\n')) {
    const [, , gid, members] = line.split(':');
    if (/^\d+$/.test(gid ?? '') && (members ?? '').split(',').includes(account.name)) gids.add(Number(gid));
  }
  return [...gids];
}
