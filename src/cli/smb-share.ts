import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * The SMB share of nasd's mount (`nas share smb`): the share definition shipped in
 * contrib/samba/agent-nas.conf with its `path =` set to the mount, printed or installed into smb.conf as
 * a file of its own beside it plus one `include =` line. Installing twice changes nothing.
 */

export const SHARE = 'agents';
export const DEFAULT_SMB_CONF = '/etc/samba/smb.conf';
/** The name of the installed file, in smb.conf's folder. */
export const SHARE_FILE = 'agent-nas.conf';

/** The shipped definition: dist/src/cli/ is three levels below the checkout (src/cli/ two, under vitest). */
export const TEMPLATE = new URL(`${import.meta.url.includes('/dist/src/cli/') ? '../../../' : '../../'}contrib/samba/agent-nas.conf`, import.meta.url);

export async function template(): Promise<string> {
  try {
    return await fs.readFile(TEMPLATE, 'utf8');
  } catch (e) {
    throw new Error(`cannot read the share definition ${TEMPLATE.pathname}: ${(e as Error).message} (is the checkout whole?)`);
  }
}

/**
 * The definition with `path =` set to the mount. smb.conf reads a value to the end of its line and expands
 * `%` macros in it, so a mount whose name holds a newline or `%` cannot be written there: refused.
 */
export function render(text: string, mount: string): string {
  if (!path.isAbsolute(mount)) throw new Error(`nasd's mount is not an absolute path: ${JSON.stringify(mount)}`);
  if (/[\n\r%]/.test(mount)) throw new Error(`nasd's mount ${JSON.stringify(mount)} holds a character smb.conf cannot take in a path (newline or %)`);
  let found = 0;
  const out = text.replace(/^(\s*path\s*=).*$/m, (_, key: string) => (found++, `${key} ${mount}`));
  if (found !== 1) throw new Error(`the share definition ${TEMPLATE.pathname} has no 'path =' line`);
  return out;
}

/** The section names smb.conf text defines, lower-cased (smbd compares them without case). */
export function sections(text: string): string[] {
  return [...text.matchAll(/^\s*\[([^\]\n]+)\]/gm)].map((m) => m[1].trim().toLowerCase());
}

/** Whether smb.conf already has an active `include =` line naming this file. */
export function includes(text: string, file: string): boolean {
  return text.split('\n').some((line) => {
    const m = /^\s*include\s*=\s*(.*?)\s*$/i.exec(line);
    return m !== null && m[1] === file;
  });
}

export interface Installed {
  share: string;
  mount: string;
  /** The installed definition, and the smb.conf that includes it. */
  file: string;
  smb_conf: string;
  /** What this call changed: the definition's content, the include line. */
  wrote_file: boolean;
  added_include: boolean;
  /** testparm's verdict on the whole smb.conf, or why it was not asked. */
  check: string;
}

/** Write a file whole or not at all (a temporary name beside it, then a rename), mode 0644. */
async function writeWhole(file: string, text: string): Promise<void> {
  const tmp = `${file}.nas-${process.pid}.tmp`;
  await fs.writeFile(tmp, text, { mode: 0o644, flag: 'wx' });
  try {
    await fs.rename(tmp, file);
  } catch (e) {
    await fs.rm(tmp, { force: true });
    throw e;
  }
}

/** testparm's check of smb.conf with what it includes: whether it ran, whether it passed (with [agents] in it), what it said. */
function testparm(conf: string): Promise<{ ran: boolean; ok: boolean; text: string }> {
  return new Promise((resolve) => {
    execFile('testparm', ['-s', '--suppress-prompt', conf], { maxBuffer: 1 << 22 }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') return resolve({ ran: false, ok: false, text: '' });
      const ok = !err && sections(stdout).includes(SHARE);
      resolve({ ran: true, ok, text: `${stderr}${err ? '' : stdout}` });
    });
  });
}

/**
 * Install the share: the definition as `<smb.conf's folder>/agent-nas.conf`, and an include line for it at the
 * end of smb.conf, each only when it is not there already. Refused when smb.conf defines `[agents]` itself.
 */
export async function install(mount: string, conf0 = DEFAULT_SMB_CONF): Promise<Installed> {
  // smbd reads a relative include from its own working directory: every name written is absolute.
  const smbConf = path.resolve(conf0);
  const text = render(await template(), mount);
  const file = path.join(path.dirname(smbConf), SHARE_FILE);
  let conf: string;
  try {
    conf = await fs.readFile(smbConf, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`${smbConf} does not exist: install Samba first (apt-get install samba)`);
    throw e;
  }
  if (sections(conf).includes(SHARE)) {
    throw new Error(`${smbConf} defines a share [${SHARE}] of its own: remove it (nas share smb installs [${SHARE}] in ${file}), or paste the output of nas share smb --print in its place`);
  }
  const before = await fs.readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return undefined;
    throw e;
  });
  const wroteFile = before !== text;
  const addedInclude = !includes(conf, file);
  try {
    if (wroteFile) await writeWhole(file, text);
    if (addedInclude) {
      const sep = conf === '' || conf.endsWith('\n') ? '' : '\n';
      await fs.appendFile(smbConf, `${sep}\n# Agent NAS: the [${SHARE}] share of nasd's mount (installed by nas share smb)\ninclude = ${file}\n`);
    }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') throw new Error(`cannot write ${wroteFile ? file : smbConf} (${code}): run nas share smb as root, or print the section with --print`);
    throw e;
  }
  const checked = await testparm(smbConf);
  if (checked.ran && !checked.ok) {
    throw new Error(`testparm does not accept ${smbConf} with [${SHARE}] (${file}):\n${checked.text.trim()}`);
  }
  return {
    share: SHARE, mount, file, smb_conf: smbConf, wrote_file: wroteFile, added_include: addedInclude,
    check: checked.ran ? 'testparm: ok' : 'testparm not found (Debian: samba-common-bin): not checked',
  };
}

/** What `nas share smb` tells a person: what changed, and what to do next. */
export function describe(r: Installed): string {
  const changed = r.wrote_file || r.added_include;
  const lines = [
    changed
      ? `installed the SMB share [${r.share}] of ${r.mount}: ${r.wrote_file ? 'wrote' : 'kept'} ${r.file}, ${r.added_include ? 'added' : 'kept'} its include line in ${r.smb_conf}`
      : `the SMB share [${r.share}] of ${r.mount} is installed already (${r.file}, included by ${r.smb_conf}): nothing changed`,
    r.check,
  ];
  if (changed) lines.push('reload Samba to serve it: smbcontrol smbd reload-config (or systemctl reload smbd)');
  lines.push(
    'each person logs in as a Unix account of this machine: smbpasswd -a <account>',
    "main is read-only; to write in a branch the account needs a write lease on it: nas lease issue <role>/<branch> --principal <account>",
  );
  return lines.join('\n') + '\n';
}
