import { command } from '../command.js';
import { size, table } from '../format.js';
import { Usage, type Args } from '../args.js';
import { parseDuration } from '../../util/duration.js';
import type { TrashListed } from '../../api/types.js';

export const help = {
  trash:
    'usage: nas trash list <role> [--branch B] [--path P]... [--search TEXT] [--since 2d] [--all]\n' +
    '       nas trash restore <role> <path> [--branch B] [--to P] [--id ID]\n\n' +
    'list shows one entry per deletion: a folder removed with rm -r stands for everything that went with it (its\n' +
    'files and bytes); deletions whose commit has not landed yet are marked pending (a restore files them first),\n' +
    'and what was restored is left out. --branch, --path (under a folder), --search (in the path) and --since\n' +
    '(deleted that recently) narrow it; --all lists every record, what went with a folder and what was restored too.\n' +
    'restore puts the newest deleted copy of <path> back into branch B (default: the branch it was deleted from).\n' +
    'It refuses to overwrite a path that exists; --to restores it under another path.\n' +
    '       nas trash purge <role> [--older-than 7d]\n\nowner: remove for good what was deleted longer ago than that (0d: everything; default: the Home\'s\n' +
    'maintenance.yaml trash_keep_days, which nasd also applies once an hour), then let git pack (gc --auto).\n',
};

export const commands = [
  command({
    name: 'trash list',
    doc: {
      usage: 'nas trash list <role> [--branch B] [--path P] [--search TEXT] [--since 2d] [--all]',
      about: 'the recycle area, one entry per deletion (a folder removed with `rm -r` stands for everything that went ' +
        'with it: `outbox/bulk/ (300 files)` and their bytes; the web page expands it), narrowed by branch, ' +
        'folder, a search in the paths and age; what was restored leaves the list (`--all` lists every record, ' +
        'marked `restored to <branch>:<path>`; `--json` always gives every record, with `contents`, `within` and ' +
        '`restored`): path, branch, kind, size, time, id; a deletion whose commit has not landed yet is listed ' +
        'too, marked `pending` (so a list right after `rm` shows it; a restore of it commits its branch first). ' +
        'Who is not the owner sees only what it could read where it was deleted (a lease holder as its principal,' +
        ' a run as its user, anyone else what every user may read)',
    },
    route: 'listTrash',
    flags: ['branch', 'path', 'search', 'since', 'all'],
    request: (args) => {
      filterOf(args);
      return { params: { role: args.need(2, '<role>') }, body: {} };
    },
    shown: (r, args) => r.filter(filterOf(args)),
    // --json gives every record (with contents, within and restored to group them by); the text one per deletion.
    print: (all, args) => {
      const r = args.has('all') ? all : all.filter((t) => !t.within && !t.restored);
      return r.length === 0
        ? (args.given().some((f) => f !== 'all') ? 'nothing in the recycle area matches\n'
          : all.length > 0 ? `nothing waits in the recycle area (${all.length} record(s) restored; --all lists them)\n` : 'the recycle area is empty\n')
        : table([['DELETED', 'BRANCH', 'KIND', 'SIZE', 'PATH', 'ID', 'STATE'],
          ...r.map((t) => [t.deletedAt, t.branch, t.kind, t.contents ? size(t.contents.bytes) : String(t.size),
            t.contents ? `${t.path}/ (${t.contents.count} file${t.contents.count === 1 ? '' : 's'})` : t.path, t.id, stateOf(t)])]);
    },
  }),
  command({
    name: 'trash restore',
    doc: {
      usage: 'nas trash restore <role> <path> [--branch B] [--to P] [--id ID]',
      about: 'put a deleted file back into a branch, with its owner, mode and times; a folder comes back whole ' +
        '(everything `rm -r` deleted with it); refuses to overwrite a path that exists unless `--to` names ' +
        'another. Needs a write lease on that branch (or the owner), checked before anything is committed; who is' +
        ' not the owner restores only what `nas trash list` shows it',
    },
    route: 'restoreTrash',
    flags: ['branch', 'to', 'id'],
    // Without a path, --id names the record; the daemon says what is missing when neither is given.
    request: (args) => ({
      params: { role: args.need(2, '<role>') },
      body: { path: args.positional[3], id: args.value('id'), branch: args.value('branch'), to: args.value('to') },
    }),
    print: (r) => `restored ${r.restored.path} (deleted ${r.restored.deletedAt} from ${r.restored.branch}) to ${r.view}/${r.to}` +
      (r.contents?.length ? ` with ${r.contents.length} path(s) deleted with it` : '') + '\n',
  }),
  command({
    name: 'trash purge',
    doc: {
      usage: 'nas trash purge <role> [--older-than 7d]',
      about: 'owner: remove for good what was deleted longer ago (`0d`: everything; default `trash_keep_days`, which ' +
        'nasd applies by itself once an hour); the recycle area\'s ref starts a new history so git can reclaim it;' +
        ' then `git gc --auto`',
    },
    route: 'purgeTrash',
    flags: ['older-than'],
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: { olderThan: args.value('older-than') } }),
    print: (r) => `purged ${r.purged.length} item(s) deleted before ${r.cutoff}\n`,
  }),
];

const stateOf = (t: TrashListed) => (t.restored ? `restored to ${t.restored.branch}:${t.restored.to}` : t.pending ? 'pending' : 'filed');

/** Which records the options ask for: --branch, --path, --search, --since. */
function filterOf(args: Args): (t: TrashListed) => boolean {
  const since = args.value('since');
  let after = 0;
  if (since !== undefined) {
    try {
      after = Date.now() - parseDuration(since) * 1000;
    } catch (e) {
      throw new Usage(`--since: ${(e as Error).message}`);
    }
  }
  const branch = args.value('branch');
  const under = args.list('path').map((p) => p.replace(/\/+$/, ''));
  const search = args.value('search')?.toLowerCase();
  return (t) => (!branch || t.branch === branch) &&
    (under.length === 0 || under.some((p) => t.path === p || t.path.startsWith(`${p}/`))) &&
    (!search || t.path.toLowerCase().includes(search)) && Date.parse(t.deletedAt) >= after;
}
