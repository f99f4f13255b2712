import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Usage } from '../args.js';
import { command } from '../command.js';
import { prState, short, size, table } from '../format.js';

export const help = {
  home:
    'usage: nas home create <role> [--template default|NAME|/DIR] [--owner NAME]\n       nas home list\n' +
    '       nas home adopt <role> <git-dir-or-url> [--owner NAME]\n' +
    '       nas home config <role> <.nas/file> [--from LOCAL_FILE] [--intent TEXT]\n' +
    '       nas home archive <role>\n       nas home unarchive <role>\n       nas home retire <role> --successor <role2>\n\n' +
    'create starts the Home from the built-in template, a named one (/etc/agent-nas/templates/NAME/, nasd\'s\n' +
    'templates_dir) or a directory: it must hold AGENTS.md; .nas/ files it lacks come from the built-in one.\n' +
    'adopt (owner) makes a Home of an existing git repository: main gets all the history of its default branch\n' +
    '(https://, ssh://, git:// or file:// URLs, or a path; no other kind) and one commit on top that sets .nas/ to\n' +
    'the built-in template\'s; its own .nas/ files (and what its checks run) and the Home\'s layout it lacks\n' +
    '(AGENTS.md naming it, with its README\'s first paragraph; CLAUDE.md; memory/, inbox/, outbox/, skills/; the\n' +
    '.gitignore\'s editor rules) wait as a PR for nas pr approve. What the repository has of these is kept.\n' +
    'A history that holds .git (any spelling), a submodule or .nas-meta in any commit is refused.\n' +
    'archive (owner) unmounts a Home and keeps its Store as it is (<state>/archive/); unarchive brings it back.\n' +
    'retire (owner) hands the Home\'s reviewed notes and skills to its successor as a PR, quarantined\n' +
    '(memory/quarantine/from-<role>/, unreviewed), ends its leases and stops new branches; it stays readable.\n' +
    'config (owner) proposes a new version of one of the Home\'s .nas/ files (the content from --from, else from\n' +
    'standard input): it is checked first, committed on a new branch off main and proposed; the PR waits for\n' +
    'nas pr approve, as every metadata change does.\n',
  export:
    'usage: nas export <role> <file>\n\nowner: write the whole Home to a new file (a git bundle, mode 0600): main, every branch (what\n' +
    'is pending is committed first), the recycle area, PRs, leases, checkpoints, runs and the files\' metadata.\n' +
    'Scratch (workspace/, ignored paths) is not in git and is not exported. An archived Home exports as it was\n' +
    'left. nas import reads it back.\n',
  import:
    'usage: nas import <file> [--as <role>]\n\nowner: make a Home from a file nas export wrote, with every ref as it was, under its own role or\n' +
    '<role>; it is mounted at once. A file that is not a whole bundle, or a role that exists, leaves nothing behind.\n',
};

export const commands = [
  command({
    name: 'home create',
    route: 'createHome',
    flags: ['template', 'owner'],
    request: (args) => ({ params: {}, body: { role: args.need(2, '<role>'), template: args.value('template'), owner: args.value('owner') } }),
    print: (r) => `created Home ${r.role} (store ${r.store})\n`,
  }),
  command({
    name: 'home adopt',
    route: 'adoptHome',
    flags: ['owner'],
    request: (args) => {
      const source = args.need(3, '<git-dir-or-url>');
      // A path is the daemon's to read: made absolute here; a URL (scheme://) goes as it is, and is checked there.
      const url = /^[A-Za-z][A-Za-z0-9+.-]*:/.test(source) ? source : path.resolve(source);
      return { params: {}, body: { role: args.need(2, '<role>'), source: url, owner: args.value('owner') } };
    },
    print: (r) => `adopted ${r.source} (its ${r.branch} branch) as Home ${r.role}, main at ${short(r.main)}\n` +
      (r.pr !== undefined ? `PR ${r.pr} (${r.prState}) proposes ${r.proposed.join(', ')}; approve with: nas pr approve ${r.role} ${r.pr}\n` : 'nothing to review: it has the Home\'s layout, and no .nas/ of its own other than the template\'s\n'),
  }),
  command({
    name: 'home config',
    route: 'proposeConfig',
    flags: ['from', 'intent'],
    request: (args) => {
      const role = args.need(2, '<role>');
      const file = args.need(3, '<.nas/file>');
      const from = args.value('from');
      if (!from && process.stdin.isTTY) throw new Usage('give the new content with --from FILE or on standard input');
      let content: string;
      try {
        content = readFileSync(from ?? 0, 'utf8');
      } catch (e) {
        throw new Usage(`cannot read ${from ?? 'standard input'}: ${(e as Error).message}`);
      }
      return { params: { role }, body: { file, content, intent: args.value('intent') } };
    },
    print: (r) => prState(r) + (r.state === 'waiting' ? `approve with: nas pr approve ${r.home} ${r.id}\n` : ''),
  }),
  command({
    name: 'home archive',
    route: 'archiveHome',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => `archived Home ${r.role} (kept in ${r.store}; nas home unarchive ${r.role} brings it back)\n`,
  }),
  command({
    name: 'home unarchive',
    route: 'unarchiveHome',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => `Home ${r.role} is served again, with branches ${r.branches.join(', ') || '-'}\n`,
  }),
  command({
    name: 'home retire',
    route: 'retireHome',
    flags: ['successor'],
    request: (args) => {
      const successor = args.value('successor');
      if (!successor) throw new Usage('name the Home that takes over: --successor <role>');
      return { params: { role: args.need(2, '<role>') }, body: { successor } };
    },
    print: (r) => `retired Home ${r.role}; ${r.successor} succeeds it` +
      (r.pr !== undefined ? `, receiving ${r.handedOver.length} file(s) in PR ${r.pr} (nas pr show ${r.successor} ${r.pr})\n` : ' (nothing reviewed to hand over)\n'),
  }),
  command({
    name: 'home list',
    route: 'listHomes',
    request: () => ({ params: {}, body: {} }),
    print: (r) =>
      table([['HOME', 'STATE', 'MAIN', 'BRANCHES', 'STORE'], ...r.map((h) => [
        h.role, h.state + (h.successor ? ` (successor ${h.successor})` : ''), short(h.main), h.branches.join(', ') || '-', h.store,
      ])]) +
      r.flatMap((h) => h.problems.map((p) => `warning: ${h.role}: ${p}\n`)).join(''),
  }),
  command({
    name: 'export',
    route: 'exportHome',
    request: (args) => ({ params: { role: args.need(1, '<role>') }, body: { file: path.resolve(args.need(2, '<file>')) } }),
    print: (r) => `exported Home ${r.role} to ${r.file}: ${size(r.bytes)}, ${r.refs} refs, in ${r.ms} ms\n`,
  }),
  command({
    name: 'import',
    route: 'importHome',
    flags: ['as'],
    request: (args) => ({ params: {}, body: { file: path.resolve(args.need(1, '<file>')), as: args.value('as') } }),
    print: (r) => `imported Home ${r.role} from ${r.file}: ${r.refs} refs, branches ${r.branches.join(', ') || '-'}, in ${r.ms} ms\n`,
  }),
];
