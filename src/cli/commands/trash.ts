import { command } from '../command.js';
import { table } from '../format.js';

export const help = {
  trash:
    'usage: nas trash list <role>\n       nas trash restore <role> <path> [--branch B] [--to P] [--id ID]\n\n' +
    'list shows deletions whose commit has not landed yet too, marked pending (a restore files them first).\n' +
    'restore puts the newest deleted copy of <path> back into branch B (default: the branch it was deleted from).\n' +
    'It refuses to overwrite a path that exists; --to restores it under another path.\n' +
    '       nas trash purge <role> [--older-than 7d]\n\nowner: remove for good what was deleted longer ago than that (0d: everything; default: the Home\'s\n' +
    'maintenance.yaml trash_keep_days, which nasd also applies once an hour), then let git pack (gc --auto).\n',
};

export const commands = [
  command({
    name: 'trash list',
    route: 'listTrash',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) =>
      r.length === 0
        ? 'the recycle area is empty\n'
        : table([['DELETED', 'BRANCH', 'KIND', 'SIZE', 'PATH', 'ID', 'STATE'],
          ...r.map((t) => [t.deletedAt, t.branch, t.kind, String(t.size), t.path, t.id, t.pending ? 'pending' : 'filed'])]),
  }),
  command({
    name: 'trash restore',
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
    route: 'purgeTrash',
    flags: ['older-than'],
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: { olderThan: args.value('older-than') } }),
    print: (r) => `purged ${r.purged.length} item(s) deleted before ${r.cutoff}\n`,
  }),
];
