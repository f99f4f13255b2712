#!/usr/bin/env node
import fs from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { DEFAULT_SOCKET } from '../daemon/config.js';

const DEFAULT_OWNER_TOKEN_FILE = '/var/lib/agent-nas/owner.token';
import { displayPath, printable } from '../util/display.js';

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
  memory check <role>[@<branch>]            budgets, indexes and trust labels; exit 1 on any error
  memory index <role>@<branch> [--check]    regenerate the topic index blocks (--check: only report)
  memory measure <role>[@<branch>] [--task PATH]...
                                            bytes and o200k_base tokens of the start set and a task
  memory review <role> <note> [--description TEXT]
                                            owner: label a note reviewed (quarantine -> notes/) on main
  memory import <role>@<branch> <file>...   bring notes from another framework into quarantine, unreviewed
  lease issue <role>/<branch> --principal P [--ttl 2h] [--scopes write,propose:main] [--budget BYTES]
                                            grant a run its branch; prints the token (with $NAS_LEASE: a sub-lease)
  lease list <role>                         leases with status; lease revoke <role> <id> (owner)
  propose <role>/<branch> --into main --intent TEXT [--checks links,schema,memory,journal]
                                            commit, diff, check, and merge or wait for the owner
  pr list <role>                            PRs: id, branch, state, checks, intent
  pr show <role> <id>                       diff, intent, provenance, checks, trust labels, reads
  pr approve <role> <id>                    owner: merge a waiting PR; pr reject <role> <id> --why TEXT
  pr stats <role>                           merged by policy, approved, rejected, waiting
  branch discard <role>/<branch>            move a branch's work to the recycle area and remove it
  context <role>[@<branch>]                 READ-ON-START and READ-ON-DEMAND paths for a session-start hook
  briefing <role>[@<branch>] [--max-tokens 2000]
                                            the token-capped boot view

credentials: $NAS_LEASE (a lease token); the owner's, read from ${DEFAULT_OWNER_TOKEN_FILE} when run as root
  (or $NAS_OWNER_TOKEN_FILE, $NAS_OWNER_TOKEN): approve, reject, review, revoke and top-level leases need it.

options:
  --socket PATH   nasd's control socket (default $NAS_SOCKET or ${DEFAULT_SOCKET})
  --json          print the daemon's answer as JSON
  --help          this text; "nas <command> --help" for one command
`,
  home: 'usage: nas home create <role> [--template default] [--owner NAME]\n       nas home list\n',
  branch:
    'usage: nas branch create <role>/<branch> [--from <branch>|main] [--ttl 48h] [--run ID]\n' +
    '       nas branch list <role>\n       nas branch discard <role>/<branch>\n\n' +
    'The TTL is recorded now; expiry is enforced by a later release. discard (owner, or a lease with write on\n' +
    'the branch) moves the branch\'s work since it forked from main to the recycle area, then removes it.\n',
  sync: 'usage: nas sync <role>[/<branch>]\n\nCommits every pending change of the branch (or of all branches of the Home) and waits for it.\n',
  trash:
    'usage: nas trash list <role>\n       nas trash restore <role> <path> [--branch B] [--to P] [--id ID]\n\n' +
    'restore puts the newest deleted copy of <path> back into branch B (default: the branch it was deleted from).\n' +
    'It refuses to overwrite a path that exists; --to restores it under another path.\n',
  status: 'usage: nas status\n',
  lease:
    'usage: nas lease issue <role>/<branch> --principal NAME [--ttl 2h] [--scopes write,propose:main] [--budget BYTES]\n' +
    '       nas lease list <role>\n       nas lease revoke <role> <id>\n\n' +
    'issue prints the token on stdout (shown once; only its hash is stored). Without $NAS_LEASE it is an owner\n' +
    'action; with $NAS_LEASE it issues a sub-lease, which may only narrow: same branch and principal, fewer scopes,\n' +
    'no later expiry, no bigger budget. The principal (a local user or uid) owns the branch view\'s files while\n' +
    'the lease is active, so the kernel keeps other users from writing them. Revocation takes effect at once.\n',
  propose:
    'usage: nas propose <role>/<branch> --into main --intent TEXT [--checks links,schema,memory,journal,...]\n\n' +
    'Needs $NAS_LEASE with propose:main on the branch (or the owner). Commits what is pending, diffs against main,\n' +
    'runs the checks main\'s .nas/ defines (its policy\'s required ones plus those asked for), and then merges\n' +
    '(all checks pass, nothing deleted, .nas/ untouched, no note marked reviewed, nothing read from inbox/) or\n' +
    'waits for nas pr approve. Exit 1 when checks fail or the merge conflicts.\n',
  pr:
    'usage: nas pr list <role>\n       nas pr show <role> <id>\n       nas pr approve <role> <id>\n' +
    '       nas pr reject <role> <id> --why TEXT\n       nas pr stats <role>\n\napprove and reject are owner actions.\n',
  memory:
    'usage: nas memory check <role>[@<branch>]\n' +
    '       nas memory index <role>@<branch> [--check]\n' +
    '       nas memory measure <role>[@<branch>] [--task memory/notes/x.md]...\n' +
    '       nas memory review <role> <note> [--description TEXT]\n' +
    '       nas memory import <role>@<branch> <file>...\n\n' +
    'check   runs every memory rule (front matter, trust labels, MEMORY.md token cap, resident byte budgets,\n' +
    '        topic indexes) and prints each problem with file and line; exit 0 when none is an error.\n' +
    '        On a branch, a note that says "trust: reviewed" but changed in the branch is an error.\n' +
    'index   rewrites the text between <!-- nas:index:start --> and <!-- nas:index:end --> in every index file\n' +
    '        of the branch and commits it; text outside the markers is kept. --check writes nothing.\n' +
    'measure prints exact bytes and tokens: start set, start + index + each --task topic, full load.\n' +
    'review  (owner) sets "trust: reviewed", moves a quarantined note into memory/notes/, regenerates the\n' +
    '        indexes, and commits that on main. Refused when it would break a budget.\n' +
    'import  copies local files (CLAUDE.md, Cursor .mdc rules, Markdown, text) into memory/quarantine/ of the\n' +
    '        branch as unreviewed notes with description, updated and source filled in; content is kept as is.\n',
  context:
    'usage: nas context <role>[@<branch>]\n\nPrints the files to read at session start, then the files to read only when a task needs them\n' +
    '(paths under the mount, not contents), ready for a session-start hook to print as is.\n',
  briefing:
    'usage: nas briefing <role>[@<branch>] [--max-tokens 2000]\n\nAGENTS.md, MEMORY.md, memory/resident.md and an inbox summary within a token cap (o200k_base).\n' +
    'Whole sections that do not fit are left out and listed at the end; nothing is cut mid-sentence.\n',
};

class Usage extends Error {}

interface Args {
  positional: string[];
  flags: Map<string, string>;
  /** --task may be given more than once. */
  tasks: string[];
  /** --check: report only. */
  check: boolean;
  json: boolean;
  help: boolean;
  socket: string;
}

const VALUE_FLAGS = new Set([
  '--socket', '--template', '--owner', '--from', '--ttl', '--run', '--branch', '--to', '--id', '--max-tokens', '--description',
  '--principal', '--scopes', '--budget', '--into', '--intent', '--checks', '--why',
]);

function parse(argv: string[]): Args {
  const args: Args = { positional: [], flags: new Map(), tasks: [], check: false, json: false, help: false, socket: process.env.NAS_SOCKET || DEFAULT_SOCKET };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') args.json = true;
    else if (a === '--check') args.check = true;
    else if (a === '--task') {
      const v = argv[++i];
      if (v === undefined) throw new Usage('--task needs a path');
      args.tasks.push(v);
    }
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

/**
 * Credentials sent with every request: the lease in $NAS_LEASE, and the owner's token from $NAS_OWNER_TOKEN
 * or the file nasd keeps it in ($NAS_OWNER_TOKEN_FILE, default /var/lib/agent-nas/owner.token: root only).
 */
function credentialHeaders(): Record<string, string> {
  const headers: Record<string, string> = {};
  if (process.env.NAS_LEASE) headers['x-nas-lease'] = process.env.NAS_LEASE.trim();
  let owner = process.env.NAS_OWNER_TOKEN;
  if (!owner) {
    try {
      owner = readFileSync(process.env.NAS_OWNER_TOKEN_FILE || DEFAULT_OWNER_TOKEN_FILE, 'utf8').trim();
    } catch {
      // Not the owner (or not on the NAS): lease-only and open commands still work.
    }
  }
  if (owner) headers['x-nas-owner'] = owner;
  return headers;
}

async function call(socket: string, method: string, path: string, body?: object): Promise<unknown> {
  const payload = body ? JSON.stringify(body) : undefined;
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request({ socketPath: socket, method, path, headers: { 'content-type': 'application/json', ...credentialHeaders() } }, (res) => {
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

async function readLocal(file: string): Promise<Buffer> {
  try {
    return await fs.readFile(file);
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
}

/** `role`, `role@branch` or `role/branch`. */
function splitTarget(spec: string): [string, string | undefined] {
  const at = spec.search(/[@/]/);
  return at < 0 ? [spec, undefined] : [spec.slice(0, at), spec.slice(at + 1)];
}

type Printer = (result: any) => string;

const indent = (text: string, n = 4): string => text.split('\n').map((l) => ' '.repeat(n) + l).join('\n');

const findingLines = (r: any): string =>
  r.findings.map((f: any) => `${f.path}${f.line ? `:${f.line}` : ''}: ${f.level} [${f.rule}] ${f.message}\n`).join('');

const checkSummary = (what: string, r: any): string =>
  `${what} ${r.view} (commit ${String(r.commit).slice(0, 12)}): ${r.ok ? 'ok' : 'FAILED'}, ${r.errors} error(s), ${r.warnings} warning(s)\n`;

const table = (rows: string[][]): string => {
  if (rows.length === 0) return '';
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n') + '\n';
};

/** Runs one command; returns the exit code (1 when a check found errors). */
async function run(args: Args): Promise<number> {
  const [cmd, sub] = args.positional;
  let failed = (_r: any) => false;
  const enc = encodeURIComponent;
  let result: unknown;
  let print: Printer = (r) => JSON.stringify(r, null, 2) + '\n';
  const target = () => splitTarget(need(args, cmd === 'memory' ? 2 : 1, '<role>[@<branch>]'));
  const branchSpec = (i: number) => {
    const [role, branch] = splitSpec(need(args, i, '<role>/<branch>'));
    if (!branch) throw new Usage('expected <role>/<branch>');
    return [role, branch] as const;
  };
  const prState = (r: any) =>
    `PR ${r.id} (${r.branch} -> ${r.target}): ${r.state}${r.reasons?.length ? ` (${r.reasons.join('; ')})` : ''}\n` +
    (r.merged ? `merged as ${r.merged.commit.slice(0, 12)} by ${r.merged.by}\n` : '') +
    r.checks.map((c: any) => `  check ${c.name}: ${c.ok ? 'pass' : 'FAIL'}${c.ok ? '' : `\n${indent(c.output)}`}\n`).join('') +
    (r.conflicts ?? []).map((c: any) => `  conflict ${c.kind} ${c.path}\n` + (c.hunks ?? []).map((h: any) =>
      `    at line ${h.line}:\n${indent(h.base.map((l: string) => `base   | ${l}`).join('\n'), 6)}\n${indent(h.main.map((l: string) => `main   | ${l}`).join('\n'), 6)}\n${indent(h.branch.map((l: string) => `branch | ${l}`).join('\n'), 6)}\n`).join('')).join('');
  switch (`${cmd ?? ''} ${['home', 'branch', 'trash', 'memory', 'lease', 'pr'].includes(cmd) ? (sub ?? '') : ''}`.trim()) {
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
    case 'lease issue': {
      const [role, branch] = branchSpec(2);
      const budget = args.flags.get('budget');
      if (budget !== undefined && !/^\d+$/.test(budget)) throw new Usage('--budget takes a number of bytes');
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/leases`, {
        branch, principal: args.flags.get('principal'), ttl: args.flags.get('ttl'), scopes: args.flags.get('scopes'), budget: budget === undefined ? undefined : Number(budget),
      });
      print = (r) => {
        process.stderr.write(`lease ${r.lease.id} for ${r.lease.principal} on ${role}/${branch}: ${r.lease.scopes.join(', ')}, until ${r.lease.expires}\n` +
          (r.access?.warning ? `warning: ${r.access.warning}\n` : ''));
        return `${r.token}\n`;
      };
      break;
    }
    case 'lease list': {
      const role = need(args, 2, '<role>');
      result = await call(args.socket, 'GET', `/v1/homes/${enc(role)}/leases`);
      print = (r) => table([['ID', 'BRANCH', 'PRINCIPAL', 'SCOPES', 'EXPIRES', 'STATUS', 'PARENT'],
        ...r.map((l: any) => [l.id, l.branch, l.principal, l.scopes.join(','), l.expires, l.status, l.parent ?? '-'])]);
      break;
    }
    case 'lease revoke': {
      const role = need(args, 2, '<role>');
      const id = need(args, 3, '<lease id>');
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/leases/${enc(id)}/revoke`);
      print = (r) => `revoked lease ${r.id} (${r.principal} on ${r.branch}) at ${r.revoked}\n`;
      break;
    }
    case 'propose': {
      const [role, branch] = branchSpec(1);
      const into = args.flags.get('into') ?? 'main';
      if (into !== 'main') throw new Usage('--into: the only target is main');
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/prs`, { branch, intent: args.flags.get('intent'), checks: args.flags.get('checks') });
      failed = (r) => r.state === 'failed' || r.state === 'conflict';
      print = prState;
      break;
    }
    case 'pr list': {
      const role = need(args, 2, '<role>');
      result = await call(args.socket, 'GET', `/v1/homes/${enc(role)}/prs`);
      print = (r) => (r.length === 0 ? 'no PRs\n' : table([['ID', 'BRANCH', 'STATE', 'CHECKS', 'INTENT'], ...r.map((p: any) => [String(p.id), p.branch, p.state, p.checks || '-', p.intent])]));
      break;
    }
    case 'pr show': {
      const role = need(args, 2, '<role>');
      const id = need(args, 3, '<id>');
      result = await call(args.socket, 'GET', `/v1/homes/${enc(role)}/prs/${enc(id)}`);
      print = (r) =>
        prState(r) +
        `intent: ${r.intent}\nprovenance: principal ${r.provenance.principal}, lease ${r.provenance.lease ?? '-'}, run ${r.provenance.run ?? '-'}\n` +
        `reads: ${r.provenance.reads} path(s), digest ${r.provenance.reads_digest}\n` +
        `trust: ${r.trust.notes_changed.length} note(s) changed, ${r.trust.unreviewed.length} unreviewed, ${r.trust.reviewed_claims.length} marked reviewed` +
        `${r.trust.reviewed_claims.length ? ` (${r.trust.reviewed_claims.join(', ')})` : ''}\n` +
        `changes: ${r.changes.added} added, ${r.changes.modified} modified, ${r.changes.deleted} deleted\n\n${r.diff}`;
      break;
    }
    case 'pr approve':
    case 'pr reject': {
      const role = need(args, 2, '<role>');
      const id = need(args, 3, '<id>');
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/prs/${enc(id)}/${sub}`, { why: args.flags.get('why') });
      failed = (r) => r.state === 'conflict';
      print = (r) => prState(r) + (r.decision?.why ? `why: ${r.decision.why}\n` : '');
      break;
    }
    case 'pr stats': {
      const role = need(args, 2, '<role>');
      result = await call(args.socket, 'GET', `/v1/homes/${enc(role)}/prs/stats`);
      print = (r) =>
        `${r.total} PR(s): ${r.merged_by_policy} merged by policy, ${r.approved} approved, ${r.rejected} rejected, ${r.waiting} waiting, ` +
        `${r.failed} failed, ${r.conflict} in conflict\napproval rate ${r.approval_rate ?? '-'}%, merged by policy ${r.auto_merge_rate ?? '-'}%\n`;
      break;
    }
    case 'branch discard': {
      const [role, branch] = branchSpec(2);
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/branches/${enc(branch)}/discard`);
      print = (r) => `discarded ${r.discarded}; ${r.recycled.length} file(s) moved to the recycle area\n`;
      break;
    }
    case 'memory check': {
      const [role, branch] = target();
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/memory/check`, { branch });
      failed = (r) => !r.ok;
      print = (r) =>
        checkSummary('memory check', r) + findingLines(r) +
        r.startSet.map((f: any) => `start set: ${f.path} ${f.bytes} B of ${f.budget} B, ${f.tokens} tokens\n`).join('') +
        (r.memoryTokens ? `memory/MEMORY.md: ${r.memoryTokens.tokens} of ${r.memoryTokens.cap} tokens\n` : '');
      break;
    }
    case 'memory index': {
      const [role, branch] = target();
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/memory/index`, { branch, check: args.check });
      failed = (r) => !r.ok;
      print = args.check
        ? (r) => checkSummary('index check', r) + findingLines(r)
        : (r) =>
          (r.written.length === 0 ? `indexes up to date in ${r.view}: ${r.indexes.join(', ') || 'none'}\n`
            : r.written.map((p: string) => `regenerated ${r.view}/${p}\n`).join('') + `committed: ${String(r.head).slice(0, 12)}\n`) +
          r.problems.map((p: any) => `${p.path}:${p.line}: error [index-markers] ${p.message} (not rewritten)\n`).join('');
      break;
    }
    case 'memory measure': {
      const [role, branch] = target();
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/memory/measure`, { branch, tasks: args.tasks });
      const row = (name: string, m: any) => [name, String(m.files.length), String(m.bytes), String(m.tokens)];
      print = (r) =>
        table([
          ['SET', 'FILES', 'BYTES', 'TOKENS'],
          row('start', r.start),
          ...(r.task ? [row('start + index + task', r.task)] : []),
          row('full load', r.full),
          ['whole memory', String(r.whole.files), String(r.whole.bytes), '-'],
        ]) + '\n' + table([['FILE', 'BYTES', 'TOKENS'], ...(r.task ?? r.start).files.map((f: any) => [f.path, String(f.bytes), String(f.tokens)])]);
      break;
    }
    case 'memory review': {
      const role = need(args, 2, '<role>');
      if (role.includes('@')) throw new Usage('reviews land on main: name the Home only');
      const path = need(args, 3, '<note>');
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/memory/review`, { path, description: args.flags.get('description') });
      print = (r) =>
        `reviewed ${r.reviewed}${r.to !== r.reviewed ? ` -> ${r.to}` : ''} on main (commit ${r.commit.slice(0, 12)})\n` +
        r.regenerated.map((p: string) => `regenerated ${p}\n`).join('');
      break;
    }
    case 'memory import': {
      const [role, branch] = target();
      const names = args.positional.slice(3);
      if (names.length === 0) throw new Usage('name the files to import');
      const files = await Promise.all(names.map(async (name) => ({ name, content: (await readLocal(name)).toString('base64') })));
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/memory/import`, { branch, files });
      failed = (r) => !r.ok;
      print = (r) =>
        r.imported.map((i: any) => `imported ${i.from} -> ${r.view}/${i.to} (unreviewed)\n`).join('') +
        r.refused.map((i: any) => `refused ${i.from}: ${i.reason}\n`).join('');
      break;
    }
    case 'context': {
      const [role, branch] = target();
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/context`, { branch });
      print = (r) =>
        'READ-ON-START (read these now, in this order):\n' + r.start.map((p: string) => `${displayPath(`${r.root}/${p}`)}\n`).join('') +
        "\nREAD-ON-DEMAND (read one only when the task needs it; memory/MEMORY.md's index says when):\n" +
        r.demand.map((d: any) => `${displayPath(`${r.root}/${d.path}`)}${d.label ? `  [${d.label}]` : ''}\n`).join('');
      break;
    }
    case 'briefing': {
      const [role, branch] = target();
      const max = args.flags.get('max-tokens');
      if (max !== undefined && !/^\d+$/.test(max)) throw new Usage('--max-tokens takes a whole number');
      result = await call(args.socket, 'POST', `/v1/homes/${enc(role)}/briefing`, { branch, maxTokens: max === undefined ? undefined : Number(max) });
      print = (r) => r.text;
      break;
    }
    default:
      throw new Usage(cmd ? `unknown command: ${args.positional.slice(0, 2).join(' ')}` : 'no command given');
  }
  process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : printable(print(result)));
  return failed(result) ? 1 : 0;
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
    return await run(args);
  } catch (e) {
    if (e instanceof Usage) {
      process.stderr.write(`nas: ${e.message}\n\n${HELP[args.positional[0]] ?? HELP['']}`);
      return 2;
    }
    process.stderr.write(`nas: ${printable((e as Error).message)}\n`);
    return 1;
  }
}

process.exitCode = await main();
