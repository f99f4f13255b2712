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
    doc: {
      usage: 'nas home create <role> [--template default|NAME|/DIR] [--owner NAME]',
      about: 'a new Home from the built-in template, a named one (`/etc/agent-nas/templates/NAME/`, nasd\'s ' +
        '`templates_dir`) or a directory: it must hold `AGENTS.md`, and every directory in it must be root\'s own ' +
        'and writable by no one else (nasd reads it as root); files, executables and symlinks are taken as they ' +
        'are (but a symlink at the top may only name a file of the template, as `CLAUDE.md -> AGENTS.md` does: a ' +
        'linked folder such as `skills` would put what agents load outside review), `.nas/` files it lacks come ' +
        'from the built-in template, `.nas/role.yaml` is the new Home\'s own; a bad template makes nothing',
    },
    route: 'createHome',
    flags: ['template', 'owner'],
    request: (args) => ({ params: {}, body: { role: args.need(2, '<role>'), template: args.value('template'), owner: args.value('owner') } }),
    print: (r) => `created Home ${r.role} (store ${r.store})\n`,
  }),
  command({
    name: 'home adopt',
    doc: {
      usage: 'nas home adopt <role> <git-dir-or-url> [--owner NAME]',
      about: 'owner: an existing git repository becomes a Home with its history: main gets every commit of its default' +
        ' branch (nothing else: no other branch, no tag), fetched over an `https://`, `ssh://`, `git://` or ' +
        '`file://` URL or from a path (any other kind, such as `<helper>::<address>`, is refused); git\'s fsck ' +
        'checks every object, and a history that holds `.git` in any spelling, a submodule (gitlink) or a root ' +
        '`.nas-meta` in any commit is refused (rewrite it without them); nasd adds one commit that sets `.nas/` ' +
        'to the built-in template\'s, and the repository\'s own `.nas/` files, the executables its ' +
        '`.nas/checks.yaml` names, and the Home\'s layout it lacks are proposed as one commit on a branch off ' +
        'main (a PR, TTL 7d) that waits for `nas pr approve`; until then the template\'s `.nas/` is in force. The ' +
        'layout is the template\'s: `AGENTS.md` (naming the repository and quoting its README\'s first paragraph), ' +
        'the `CLAUDE.md` link, `memory/MEMORY.md`, `memory/notes/`, `memory/journal/`, `memory/quarantine/`, ' +
        '`inbox/`, `outbox/`, `skills/` and `.gitignore`; what the repository has is kept (a file or folder of the ' +
        'same name is left alone, and its own `.gitignore` only gains the editor rules it lacks)',
    },
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
    doc: {
      usage: 'nas home config <role> <.nas/file> [--from FILE] [--intent T]',
      about: 'owner: the supported way to change `.nas/` (branches refuse it, main only merges): the content (from ' +
        'FILE or stdin) is checked, committed on a new branch `nas-config-<time>` off main and proposed; the PR ' +
        'waits for `nas pr approve`',
    },
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
    doc: {
      usage: 'nas home archive <role>',
      about: 'owner: commit what is pending, end the leases and unmount the Home; its Store is kept as it is in ' +
        '`<state>/archive/<role>.git` (listed as `archived`) until `nas home unarchive`. Refused while a run is ' +
        'in flight',
    },
    route: 'archiveHome',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => `archived Home ${r.role} (kept in ${r.store}; nas home unarchive ${r.role} brings it back)\n`,
  }),
  command({
    name: 'home unarchive',
    doc: {
      usage: 'nas home unarchive <role>',
      about: 'owner: mount an archived Home again, from its Store as `nas home archive` kept it',
    },
    route: 'unarchiveHome',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => `Home ${r.role} is served again, with branches ${r.branches.join(', ') || '-'}\n`,
  }),
  command({
    name: 'home retire',
    doc: {
      usage: 'nas home retire <role> --successor <role2>',
      about: 'owner: the successor receives the Home\'s reviewed notes and its skills as one PR, quarantined in ' +
        '`memory/quarantine/from-<role>/` (labelled unreviewed, with `source:`), so nothing is auto-loaded before' +
        ' its owner reviews it; the retired Home stays mounted and readable, its leases end, it takes no new ' +
        'branches, and each Home records the other (`refs/nas/lifecycle`, `nas home list`)',
    },
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
    doc: {
      usage: 'nas home list',
      about: 'Homes, branches, and any problem with their `.nas/` files',
    },
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
    doc: {
      usage: 'nas export <role> <file>',
      about: 'owner: the whole Home in one new file (a git bundle of every ref, mode 0600: main, branches with pending' +
        ' work committed first, recycle area, PRs, leases, checkpoints, runs, the files\' metadata records; ' +
        'scratch is not in git and does not travel); an archived Home exports from its archived Store',
    },
    route: 'exportHome',
    request: (args) => ({ params: { role: args.need(1, '<role>') }, body: { file: path.resolve(args.need(2, '<file>')) } }),
    print: (r) => `exported Home ${r.role} to ${r.file}: ${size(r.bytes)}, ${r.refs} refs, in ${r.ms} ms\n`,
  }),
  command({
    name: 'import',
    doc: {
      usage: 'nas import <file> [--as <role>]',
      about: 'owner: a Home made from such a file, every ref as it was but the leases, which end (a token of the Home ' +
        'exported works in no copy of it), mounted at once; a file that is not a whole bundle, or a role that ' +
        'exists, leaves nothing behind',
    },
    route: 'importHome',
    flags: ['as'],
    request: (args) => ({ params: {}, body: { file: path.resolve(args.need(1, '<file>')), as: args.value('as') } }),
    print: (r) => `imported Home ${r.role} from ${r.file}: ${r.refs} refs, branches ${r.branches.join(', ') || '-'}, in ${r.ms} ms\n`,
  }),
];
