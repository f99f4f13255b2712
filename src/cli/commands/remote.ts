import { command } from '../command.js';
import { table } from '../format.js';

export const help = {
  remote:
    'usage: nas remote add <role> <git-url>\n       nas remote list <role>\n       nas remote remove <role> <git-url>\n\n' +
    'Mirror a Home to a git server you already run: every ref (main, branches, and the recycle area, PRs,\n' +
    'leases, checkpoints under refs/nas/) is pushed a few seconds after it changes; refs removed here are removed\n' +
    'there. add (owner) pushes once first and keeps the remote only if that succeeds; list shows the last push\n' +
    'and the last error. The URL stays in the Store\'s own git config (never exported). Under the systemd unit,\n' +
    'allow the network first (see README).\n',
};

export const commands = [
  command({
    name: 'remote add',
    route: 'addRemote',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: { url: args.need(3, '<git-url>') } }),
    print: (r) => `Home ${r.role} now mirrors to ${r.url} (first push done)\n`,
  }),
  command({
    name: 'remote list',
    route: 'listRemotes',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => r.length === 0 ? 'no remotes\n' : table([['NAME', 'URL', 'LAST PUSH', 'ERROR'], ...r.map((x) => [x.name, x.url, x.pushed ?? '-', x.error ?? '-'])]),
  }),
  command({
    name: 'remote remove',
    route: 'removeRemote',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: { url: args.need(3, '<git-url>') } }),
    print: (r) => `Home ${r.role} no longer mirrors to ${r.url} (what was pushed stays there)\n`,
  }),
];
