import { command } from '../command.js';
import { table } from '../format.js';

export const help = {
  remote:
    'usage: nas remote add <role> <git-url>\n       nas remote list <role>\n       nas remote remove <role> <git-url>\n\n' +
    'Mirror a Home to a git server you already run: every ref (main, branches, and the recycle area, PRs,\n' +
    'leases, checkpoints under refs/nas/) is pushed a few seconds after it changes; refs removed here are removed\n' +
    'there. add (owner) pushes once first and keeps the remote only if that succeeds; list shows the last push\n' +
    'and the last error. The URL stays in the Store\'s own git config (never exported). Under the systemd unit,\n' +
    'allow the network first (docs/cluster.md shows the drop-in).\n',
};

export const commands = [
  command({
    name: 'remote add',
    doc: {
      usage: 'nas remote add <role> <git-url>',
      about: 'owner: mirror every ref (main, branches, `refs/nas/*`) to a git server you run (`git daemon`, `git ' +
        'http-backend`, ssh: an `https://`, `ssh://`, `git://` or `file://` URL, or an absolute path; any other ' +
        'kind, such as `<helper>::<address>`, would have git run a program as root and is refused), a few seconds' +
        ' after each change; the remote must be an empty repository (a mirror replaces what is there) and the ' +
        'first push must succeed, or it is not kept; a failing remote is retried less and less often (up to every' +
        ' 5 minutes). The URL lives in the Store\'s own git config. Under the systemd unit, add the git server\'s ' +
        'address to `IPAddressAllow=` (the unit allows loopback only)',
    },
    route: 'addRemote',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: { url: args.need(3, '<git-url>') } }),
    print: (r) => `Home ${r.role} now mirrors to ${r.url} (first push done)\n`,
  }),
  command({
    name: 'remote list',
    doc: {
      usage: 'nas remote list <role>',
      about: 'owner: the Home\'s mirrors, each with its last push and its last error',
    },
    route: 'listRemotes',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => r.length === 0 ? 'no remotes\n' : table([['NAME', 'URL', 'LAST PUSH', 'ERROR'], ...r.map((x) => [x.name, x.url, x.pushed ?? '-', x.error ?? '-'])]),
  }),
  command({
    name: 'remote remove',
    doc: {
      usage: 'nas remote remove <role> <git-url>',
      about: 'owner: stop mirroring to that remote (what it holds is left there)',
    },
    route: 'removeRemote',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: { url: args.need(3, '<git-url>') } }),
    print: (r) => `Home ${r.role} no longer mirrors to ${r.url} (what was pushed stays there)\n`,
  }),
];
