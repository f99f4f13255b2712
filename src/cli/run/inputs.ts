import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { lookupAccount, type Account } from '../../util/accounts.js';
import { Usage } from '../args.js';

/** What nas run checks on the command line before it asks nasd for anything: a refused run creates nothing. */

/**
 * Who the command runs as: --user, else the user sudo was called by; never root. A run is confined by what its
 * user may not do: root, whatever capabilities it is left, owns and may write root's files anywhere on the
 * host (cron, /etc, the state directory once it lifts the cover), so a run as root would be no run at all.
 */
export async function runAccount(user: string | undefined): Promise<Account> {
  const name = user ?? (process.env.SUDO_USER && process.env.SUDO_USER !== 'root' ? process.env.SUDO_USER : undefined);
  if (!name) {
    throw new Usage('nas run runs the command as the user who called it, but that is root here: name an unprivileged user with --user NAME');
  }
  const account = await lookupAccount(name);
  if (!account) throw new Usage(`no local user "${name}" (see /etc/passwd): create it with useradd, or name another with --user`);
  if (account.uid === 0) {
    throw new Usage(`a run cannot be root ("${name}" is uid 0): root can write root's files anywhere on the host, so nothing would confine it; ` +
      'name an unprivileged user with --user (useradd makes one), or work in a branch as root without nas run');
  }
  return account;
}

const SIZE_UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** `50M`, `2G`, `512k`, `1000` (binary units: 50M is 50 MiB) as bytes. */
export function parseSize(text: string, flag: string): number {
  const m = /^(\d+)\s*([kmgt]?)(i?b)?$/i.exec(text.trim());
  if (!m) throw new Usage(`${flag} must be a size such as 50M, 2G, 512k or a number of bytes; got "${text}"`);
  const bytes = Number(m[1]) * SIZE_UNITS[m[2].toLowerCase()];
  if (!Number.isSafeInteger(bytes)) throw new Usage(`${flag} ${text} is too large`);
  return bytes;
}

/** --attempts: 1 to 16 runs of the same command. */
export function parseAttempts(text: string | undefined): number {
  if (text === undefined) return 1;
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > 16) throw new Usage(`--attempts must be a whole number from 1 to 16; got "${text}"`);
  return Number(text);
}

async function groupsOf(account: Account): Promise<Set<number>> {
  const groups = new Set([account.gid]);
  const text = await fs.readFile('/etc/group', 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    const [, , gid, members] = line.split(':');
    if (members?.split(',').includes(account.name)) groups.add(Number(gid));
  }
  return groups;
}

/** Whether the account (never root: runAccount) may execute a file with this mode and owner. */
function executableBy(st: { mode: number; uid: number; gid: number }, account: Account, groups: Set<number>): boolean {
  if (st.uid === account.uid) return (st.mode & 0o100) !== 0;
  if (groups.has(st.gid)) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

/** Whether the account can reach and execute the file, directories on the way included (asked as that account). */
function reachableBy(file: string, account: Account): boolean {
  const r = spawnSync('setpriv', [`--reuid=${account.uid}`, `--regid=${account.gid}`, '--init-groups', '--', 'test', '-x', file], { stdio: 'ignore' });
  return r.status === 0;
}

/**
 * The program to run, as it will be named inside the run: a bare name is looked up in PATH (and passed on as
 * the path found); a path with a slash is taken from where nas run was called, else from the Home (the run's
 * working directory), where it is passed on as it is.
 */
export async function resolveProgram(program: string, account: Account, homeDir: () => Promise<string>): Promise<string> {
  const groups = await groupsOf(account);
  const candidates = program.includes('/')
    ? [{ file: () => path.resolve(program), pass: path.resolve(program) }, { file: async () => path.resolve(await homeDir(), program), pass: program }]
    : (process.env.PATH || '/usr/local/bin:/usr/bin:/bin').split(':').filter((d) => d.startsWith('/')).map((d) => ({ file: () => path.join(d, program), pass: path.join(d, program) }));
  let refused = '';
  for (const candidate of candidates) {
    const c = { file: await candidate.file(), pass: candidate.pass };
    const st = await fs.stat(c.file).catch(() => null);
    if (!st) continue;
    if (!st.isFile()) refused ||= `${c.file} is not a file`;
    else if (!executableBy(st, account, groups) || !reachableBy(c.file, account)) {
      refused ||= `${c.file} is not executable by ${account.name} (chmod +x, a directory on its way it may not enter, or run as another --user)`;
    } else return c.pass;
  }
  if (refused) throw new Usage(refused);
  throw new Usage(program.includes('/') ? `no such program: ${program}` : `command not found: ${program} (searched PATH: ${process.env.PATH ?? ''})`);
}
