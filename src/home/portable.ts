import fs from 'node:fs/promises';
import { exists } from '../util/exists.js';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Beneath } from '../util/beneath.js';
import { hasCode, UserError } from '../util/errors.js';
import { validateRole } from '../util/names.js';
import { checkGitUrl } from '../util/git-url.js';
import { FsckRefusal, Store, type Identity } from '../store/store.js';
import { MAIN_REF } from '../store/refs.js';
import { Home } from './home.js';
import { parseRole } from '../config/home-config.js';
import { findUnservable } from './history-audit.js';

/**
 * A Home as one file: a git bundle of every ref of its Store. Main, branches (pending work committed first by the
 * caller), the recycle area, PRs, leases, checkpoints, runs and the files' metadata records are all refs or
 * reachable from them, so the bundle carries them all. Scratch (`workspace/`, ignored paths) is not in git and
 * does not travel, and neither do leases: their records come along, ended.
 */

/** Write a Home's bundle (from its Store) to `file` (absolute, not existing yet), readable by its owner only. */
export async function exportHome(store: Store, file: string): Promise<{ bytes: number; refs: number }> {
  const target = absoluteNew(file);
  const dir = path.dirname(target);
  const name = path.basename(target);
  // Built in root's own directory, then copied into a new file made in the target directory held
  // open (opened from / without following a link: root writes nowhere a user's symbolic link points), under a
  // hidden name, and linked into place: no one reads it half-made, and the link fails rather than overwrite.
  // Beside the Store (root's own, on the state directory's disk, not a tmpfs): an import's prefix, so what a
  // crash leaves there is removed at the next start.
  const work = await fs.mkdtemp(path.join(path.dirname(store.path), `${IMPORTING}export-`));
  try {
    await store.bundle(`${work}/bundle`);
    await fs.chmod(`${work}/bundle`, 0o600);
    const bytes = await new Beneath('/', false).inDir(dir.slice(1), async (at) => {
      if (await exists(`${at}/${name}`)) throw new UserError(`${target} exists; nothing was written. Name a new file`, 409);
      const hidden = `${at}/.nas-export-${randomBytes(6).toString('hex')}`;
      await fs.copyFile(`${work}/bundle`, hidden, fs.constants.COPYFILE_EXCL);
      try {
        await fs.link(hidden, `${at}/${name}`);
      } catch (e) {
        if (hasCode(e, 'EEXIST')) throw new UserError(`${target} exists; nothing was written. Name a new file`, 409);
        // A versioned folder of a Home refuses a second name for a file (git keeps none).
        if (hasCode(e, 'EPERM')) throw new UserError(`${dir} takes no hard links (a versioned folder of a Home?); nothing was written. Name a directory outside the mount, or a workspace/`);
        throw e;
      } finally {
        await fs.unlink(hidden);
      }
      return (await fs.lstat(`${at}/${name}`)).size;
    }).catch((e) => {
      if (hasCode(e, 'ELOOP')) throw new UserError(`${dir} leads through a symbolic link; nothing was written. Name the real directory`);
      if (hasCode(e, 'ENOENT') || hasCode(e, 'ENOTDIR')) throw new UserError(`${dir} is not a directory; nothing was written`);
      throw e;
    });
    return { bytes, refs: (await store.listRefs('refs/')).size };
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

/**
 * Make a Home from a bundle, under `role` (default: the role its `.nas/role.yaml` names). Built in a directory
 * nasd does not list, and renamed into place only when whole: an import that fails (not a bundle, truncated, no
 * main, the name taken) leaves nothing behind.
 */
export async function importHome(
  stateDir: string, file: string, role: string | undefined, identity: Identity, archived: (role: string) => boolean = () => false,
  prepare: (store: Store) => Promise<void> = async () => undefined,
): Promise<Home> {
  if (role !== undefined) validateRole(role);
  const source = absoluteNew(file);
  if (!(await fs.stat(source).then((s) => s.isFile(), () => false))) throw new UserError(`${source} is not a file; export one with nas export <role> <file>`, 404);
  const building = `${stateDir}/homes/${IMPORTING}${process.pid}-${Date.now()}`;
  await fs.mkdir(building, { recursive: true, mode: 0o700 });
  try {
    const store = await Store.init(building);
    try {
      await store.fetchBundle(source);
    } catch (err) {
      throw new UserError(`${source} is not a whole git bundle of a Home (${(err as Error).message.split('\n')[0]}); nothing was imported`);
    }
    const main = await store.readRef(MAIN_REF);
    if (!main) throw new UserError(`${source} has no main branch: it is not a Home's bundle; nothing was imported`);
    const name = role ?? (await roleNamed(store, main));
    if (!name) throw new UserError(`${source}'s .nas/role.yaml names no role; import it with --as <role>`);
    const dir = Home.dirFor(stateDir, validateRole(name));
    if (archived(name) || (await exists(dir))) {
      throw new UserError(`a Home named "${name}" exists already${archived(name) ? ' (archived)' : ''}; nothing was imported. Import under another name with --as <role>`, 409);
    }
    // What must not travel is ended in the Store before it is a Home (leases: see the import workflow).
    await prepare(store);
    await store.setHead(MAIN_REF);
    await fs.mkdir(`${building}/nas/branches`, { recursive: true });
    await fs.rename(building, dir);
    return await Home.open(stateDir, name, identity);
  } catch (err) {
    await fs.rm(building, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Make a Home from a git repository elsewhere (`nas home adopt`): all the history of its default branch becomes
 * main's, nothing else is taken (no other branch, no tag). git's fsck checks what is fetched, and the history is
 * refused whole if any of its commits holds what no Home may (history-audit.ts). `prepare` may then add to main
 * before the Home exists (the adopt workflow puts the template's `.nas/` on top, so the repository's own is
 * never in force before review). Built as an import is, so a refusal or a fetch that fails leaves nothing
 * behind. `upstream` is the repository's head.
 */
export async function adoptRepository(
  stateDir: string, role: string, source: string, identity: Identity, archived: (role: string) => boolean = () => false,
  prepare: (store: Store, upstream: string) => Promise<void> = async () => undefined,
): Promise<{ home: Home; branch: string; upstream: string }> {
  validateRole(role);
  checkGitUrl(source, 'repository');
  const taken = async () => archived(role) || (await exists(Home.dirFor(stateDir, role)));
  const refuseTaken = () => new UserError(`a Home named "${role}" exists already${archived(role) ? ' (archived)' : ''}; nothing was adopted. Choose another role`, 409);
  if (await taken()) throw refuseTaken();
  const building = `${stateDir}/homes/${IMPORTING}${process.pid}-${Date.now()}`;
  await fs.mkdir(building, { recursive: true, mode: 0o700 });
  try {
    const store = await Store.init(building);
    let branch: string;
    try {
      branch = await store.fetchDefaultBranch(source, MAIN_REF);
    } catch (err) {
      if (err instanceof FsckRefusal) {
        throw new UserError(`${source}'s history holds an object git's fsck refuses (${err.finding}), so nothing was adopted. ${rewrite()}`);
      }
      throw new UserError(`cannot take the history of ${source}, so nothing was adopted: ${(err as Error).message}`, 502);
    }
    const upstream = (await store.readRef(MAIN_REF))!;
    const found = await findUnservable(store, upstream);
    if (found) {
      const at = shownPath(found.path);
      throw new UserError(`${source}'s history holds ${at} (in commit ${found.commit.slice(0, 12)}), which ${found.why}; nothing was adopted. ` +
        rewrite(`git filter-repo --invert-paths --path '${at.replace(/'/g, "'\\''")}'`));
    }
    await prepare(store, upstream);
    if (await taken()) throw refuseTaken();
    await store.setHead(MAIN_REF);
    await fs.mkdir(`${building}/nas/branches`, { recursive: true });
    await fs.rename(building, Home.dirFor(stateDir, role));
    return { home: await Home.open(stateDir, role, identity), branch, upstream };
  } catch (err) {
    await fs.rm(building, { recursive: true, force: true });
    throw err;
  }
}

/** What to do when a repository's history holds what a Home cannot take: every commit counts, the old ones too. */
const rewrite = (how?: string): string => `Rewrite the history without it${how ? ` (e.g. ${how})` : ''} and adopt again: ` +
  'a new commit that removes it is not enough, as a Home serves every commit of its history';

/** A path as a message shows it: characters a terminal would act on or not show are escaped (\u200c), so `.g\u200cit` reads as it is. */
const shownPath = (p: string): string =>
  p.replace(/[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** Where an import is built: a name Home.list skips; what a crash leaves there is removed at the next start. */
export const IMPORTING = '.import-';

/** The role main's `.nas/role.yaml` names. */
async function roleNamed(store: Store, main: string): Promise<string | undefined> {
  const entry = await store.lookupPath((await store.readCommit(main)).tree, '.nas/role.yaml');
  if (!entry) return undefined;
  const role = parseRole((await store.readBlob(entry.oid)).toString()).value.role;
  return typeof role === 'string' ? role : undefined;
}

function absoluteNew(file: string): string {
  if (!path.isAbsolute(file)) throw new UserError(`${file}: give an absolute path (the daemon reads and writes it)`);
  return path.normalize(file);
}
