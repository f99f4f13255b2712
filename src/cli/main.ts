#!/usr/bin/env node
import http from 'node:http';
import { DEFAULT_SOCKET } from '../daemon/config.js';

/** nas: a thin client of nasd's control socket. */

const HELP: Record<string, string> = {
  '': `usage: nas [--socket PATH] [--json] <command> ...

commands:
  status                                    what nasd serves
  home create <role> [--template default]   create a Home from a template
  home list                                 list Homes, their branches and metadata problems
  branch create <role>/<branch> [--from main] [--ttl 48h] [--run ID]
                                            create a writable branch view <mount>/<role>@<branch>
  branch list <role>                        list a Home's branches
  sync <role>[/<branch>]                    commit everything pending now, and wait for it
  trash list <role>                         the recycle area: what was deleted, where, when
  trash restore <role> <path> [--branch B] [--to P] [--id ID]
                                            bring a deleted path back into a branch

options:
  --socket PATH   nasd's control socket (default $NAS_SOCKET or ${DEFAULT_SOCKET})
  --json          print the daemon's answer as JSON
  --help          this text; "nas <command> --help" for one command
`,
  home: 'usage: nas home create <role> [--template default] [--owner NAME]\n       nas home list\n',
  branch:
    'usage: nas branch create <role>/<branch> [--from <branch>|main] [--ttl 48h] [--run ID]\n' +
    '       nas branch list <role>\n\nThe TTL is recorded now; expiry is enforced by a later release.\n',
  sync: 'usage: nas sync <role>[/<branch>]\n\nCommits every pending change of the branch (or of all branches of the Home) and waits for it.\n',
  trash:
    'usage: nas trash list <role>\n       nas trash restore <role> <path> [--branch B] [--to P] [--id ID]\n\n' +
    'restore puts the newest deleted copy of <path> back into branch B (default: the branch it was deleted from).\n' +
    'It refuses to overwrite a path that exists; --to restores it under another path.\n',
  status: 'usage: nas status\n',
};

class Usage extends Error {}

interface Args {
  positional: string[];
  flags: Map<string, string>;
  json: boolean;
  help: boolean;
  socket: string;
}

const VALUE_FLAGS = new Set(['--socket', '--template', '--owner', '--from', '--ttl', '--run', '--branch', '--to', '--id']);

function parse(argv: string[]): Args {
  const args: Args = { positional: [], flags: new Map(), json: false, help: false, socket: process.env.NAS_SOCKET || DEFAULT_SOCKET };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') args.json = true;
    else if (a === '--help' || a === '-h') args.help = true;
    else if (VALUE_FLAGS.has(a)) {
      const v = argv[++i];
      if (v === undefined) throw new Usage(`${a} needs a value`);
      if (a === '--socket') args.socket = v;
      else args.flags.set(a.slice(2), v);
    } else if (a.startsWith('--')) throw new Usage(`unknown option ${a}`);
    else args.positional.push(a);
  }
  return args;
}

async function call(socket: string, method: string, path: string, body?: object): Promise<unknown> {
  const payload = body ? JSON.stringify(body) : undefined;
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request({ socketPath: socket, method, path, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(payload);
  }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
      throw new Error(`nasd is not running (nothing answers on ${socket}). Start it with: systemctl start nasd, or scripts/mount.sh`);
    }
    if (err.code === 'EACCES') throw new Error(`no permission to use ${socket}: run nas as root or a member of the socket's group`);
    throw err;
  });
  let reply: { ok: boolean; result?: unknown; error?: string };
  try {
    reply = JSON.parse(text);
  } catch {
    throw new Error(`nasd answered ${status} with something that is not JSON`);
  }
  if (!reply.ok) throw new Error(reply.error ?? `nasd answered ${status}`);
  return reply.result;
}

function need(args: Args, index: number, what: string): string {
  const v = args.positional[index];
  if (!v) throw new Usage(`missing ${what}`);
  return v;
}

function splitSpec(spec: string): [string, string | undefined] {
  const slash = spec.indexOf('/');
  return slash < 0 ? [spec, undefined] : [spec.slice(0, slash), spec.slice(slash + 1)];
}

type Printer = (result: any) => string;

const table = (rows: string[][]): string => {
  if (rows.length === 0) return '';
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n') + '\n';
};

async function run(args: Args): Promise<void> {
  const [cmd, sub] = args.positional;
  const enc = encodeURIComponent;
  let result: unknown;
  let print: Printer = (r) => JSON.stringify(r, null, 2) + '\n';
  switch (`${cmd ?? ''} ${['home', 'branch', 'trash'].includes(cmd) ? (sub ?? '') : ''}`.trim()) {
    case 'status':
      result = await call(args.socket, 'GET', '/v1/status');
      print = (r) => table([['HOME', 'MAIN', 'BRANCHES'], ...r.homes.map((h: any) => [h.role, h.main.slice(0, 12), h.branches.join(', ') || '-'])]);
      break;
    case 'home create': {
      const role = need(args, 2, '<role>');
      result = await call(args.socket, 'POST', '/v1/homes', { role, template: args.flags.get('template'), owner: args.flags.get('owner') });
      print = (r) => `created Home ${r.role} (store ${r.store})\n`;
      break;
    }
    case 'home list':
      result = await call(args.socket, 'GET', '/v1/homes');
      print = (r) =>
        table([['HOME', 'MAIN', 'BRANCHES', 'STORE'], ...r.map((h: any) => [h.role, h.main.slice(0, 12), h.branches.join(', ') || '-', h.store])]) +
        r.flatMap((h: any) => h.problems.map((p: string) => `warning: ${h.role}: ${p}\n`)).join('');
      break;
    case 'branch create': {
      const [role, branch] = splitSpec(need(args, 2, '<role>/<branch>'));
      if (!branch) throw new Usage('expected <role>/<branch>');
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/branches`, {
        branch, from: args.flags.get('from'), ttl: args.flags.get('ttl'), run: args.flags.get('run'),
      });
      print = (r) => `created branch ${r.view} from ${r.from} at ${r.base.slice(0, 12)} (ttl ${r.ttl}, expires ${r.expires}) in ${r.createdInMs} ms\n`;
      break;
    }
    case 'branch list': {
      const role = need(args, 2, '<role>');
      result = await call(args.socket, 'GET', `/v1/homes/${enc(role)}/branches`);
      print = (r) =>
        table([['BRANCH', 'HEAD', 'FROM', 'EXPIRES', 'PENDING'], ...r.map((b: any) => [b.name, (b.head ?? '').slice(0, 12), b.from, b.expires, String(b.pending)])]);
      break;
    }
    case 'sync': {
      const [role, branch] = splitSpec(need(args, 1, '<role>[/<branch>]'));
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/sync`, { branch });
      print = (r) => Object.entries(r).map(([v, head]) => `${v} ${String(head).slice(0, 12)}\n`).join('');
      break;
    }
    case 'trash list': {
      const role = need(args, 2, '<role>');
      result = await call(args.socket, 'GET', `/v1/homes/${enc(role)}/trash`);
      print = (r) =>
        r.length === 0
          ? 'the recycle area is empty\n'
          : table([['DELETED', 'BRANCH', 'KIND', 'SIZE', 'PATH', 'ID'], ...r.map((t: any) => [t.deletedAt, t.branch, t.kind, String(t.size), t.path, t.id])]);
      break;
    }
    case 'trash restore': {
      const role = need(args, 2, '<role>');
      const path = args.positional[3];
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/trash/restore`, {
        path, id: args.flags.get('id'), branch: args.flags.get('branch'), to: args.flags.get('to'),
      });
      print = (r) => `restored ${r.restored.path} (deleted ${r.restored.deletedAt} from ${r.restored.branch}) to ${r.view}/${r.to}\n`;
      break;
    }
    default:
      throw new Usage(cmd ? `unknown command: ${args.positional.slice(0, 2).join(' ')}` : 'no command given');
  }
  process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : print(result));
}

async function main(): Promise<number> {
  let args: Args;
  try {
    args = parse(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`nas: ${(e as Error).message}\n\n${HELP['']}`);
    return 2;
  }
  if (args.help || args.positional.length === 0) {
    process.stdout.write(HELP[args.positional[0] ?? ''] ?? HELP['']);
    return args.help ? 0 : 2;
  }
  try {
    await run(args);
    return 0;
  } catch (e) {
    if (e instanceof Usage) {
      process.stderr.write(`nas: ${e.message}\n\n${HELP[args.positional[0]] ?? HELP['']}`);
      return 2;
    }
    process.stderr.write(`nas: ${(e as Error).message}\n`);
    return 1;
  }
}

process.exitCode = await main();
