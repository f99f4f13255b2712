import { branchSpec, wholeNumber } from '../args.js';
import { command } from '../command.js';
import { table } from '../format.js';
import type { LeaseIssued } from '../../api/types.js';

export const help = {
  lease:
    'usage: nas lease issue <role>/<branch> --principal NAME [--ttl 2h] [--scopes write,propose:main] [--budget BYTES]\n' +
    '       nas lease list <role>\n       nas lease revoke <role> <id>\n\n' +
    'issue prints the token on stdout (shown once; only its hash is stored). Without $NAS_LEASE it is an owner\n' +
    'action; with $NAS_LEASE it issues a sub-lease, which may only narrow: same branch and principal, fewer scopes,\n' +
    'no later expiry, no bigger budget. Scopes: write, propose:main (the default: both) and egress (effects outside\n' +
    'the Home: a nas run whose lease has it gets the host\'s network, one without it loopback only; a sub-lease has\n' +
    'it only if its parent does). The principal (a local user or uid) owns the branch view\'s files while\n' +
    'the lease is active, so the kernel keeps other users from writing them. Revocation takes effect at once.\n',
};

/** What a lease grants, in a line. */
const granted = (r: LeaseIssued, spec: string): string =>
  `lease ${r.lease.id} for ${r.lease.principal} on ${spec}: ${r.lease.scopes.join(', ')}, until ${r.lease.expires}\n`;

export const commands = [
  command({
    name: 'lease issue',
    doc: {
      usage: 'nas lease issue <role>/<branch> --principal P [--ttl 2h] [--scopes write,propose:main] [--budget BYTES]',
      about: 'grant a run its branch; prints the token (with `$NAS_LEASE` set: a sub-lease, which can only narrow)',
    },
    route: 'issueLease',
    flags: ['principal', 'ttl', 'scopes', 'budget'],
    request: (args) => {
      const [role, branch] = branchSpec(args, 2);
      const budget = wholeNumber(args, 'budget', '--budget takes a number of bytes');
      return { params: { role }, body: { branch, principal: args.value('principal'), ttl: args.value('ttl'), scopes: args.value('scopes'), budget } };
    },
    // At a terminal, what it grants and the token, on stdout; into a pipe or file (TOKEN=$(nas lease issue ...))
    // the token alone there, and what it grants on stderr. A warning is always on stderr.
    notice: (r, args) => (process.stdout.isTTY ? '' : granted(r, args.positional[2])) + (r.access?.warning ? `warning: ${r.access.warning}\n` : ''),
    print: (r, args) => (process.stdout.isTTY ? granted(r, args.positional[2]) : '') + `${r.token}\n`,
  }),
  command({
    name: 'lease list',
    doc: {
      usage: 'nas lease list <role>',
      about: 'leases with their status (the owner sees all; a lease holder, with `$NAS_LEASE`, or a run its own; ' +
        'anyone else none)',
    },
    route: 'listLeases',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => table([['ID', 'BRANCH', 'PRINCIPAL', 'SCOPES', 'EXPIRES', 'STATUS', 'PARENT'],
      ...r.map((l) => [l.id, l.branch, l.principal, l.scopes.join(','), l.expires, l.status, l.parent ?? '-'])]),
  }),
  command({
    name: 'lease revoke',
    doc: {
      usage: 'nas lease revoke <role> <id>',
      about: 'owner: revoke a lease (and its sub-leases); it takes effect at once',
    },
    route: 'revokeLease',
    request: (args) => ({ params: { role: args.need(2, '<role>'), id: args.need(3, '<lease id>') }, body: {} }),
    print: (r) => `revoked lease ${r.id} (${r.principal} on ${r.branch}) at ${r.revoked}\n`,
  }),
];
