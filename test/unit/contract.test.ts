import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { ROUTES, ROUTE_NAMES, type RouteName, type RouteSpec } from '../../src/api/contract.js';
import { fillPath, matchRoute } from '../../src/api/paths.js';
import { validateBody } from '../../src/api/validate.js';
import { handlers } from '../../src/daemon/handlers.js';
import type { Workflows } from '../../src/workflows/all.js';
import type { WebLogins } from '../../src/daemon/web-sessions.js';
import { COMMANDS } from '../../src/cli/commands/index.js';
import { parse } from '../../src/cli/args.js';
import { UserError } from '../../src/util/errors.js';
import type { Credentials } from '../../src/api/credentials.js';

/** The control API contract without a daemon: validation, routing, and that both sides cover every route. */

const refused = (route: RouteName, body: unknown): string => {
  try {
    validateBody(route, body);
  } catch (e) {
    expect(e).toBeInstanceOf(UserError);
    expect((e as UserError).status).toBe(400);
    return (e as Error).message;
  }
  throw new Error(`${route} accepted ${JSON.stringify(body)}`);
};

describe('request validation', () => {
  it('names the field of a malformed body', () => {
    expect(refused('createBranch', {})).toBe('body.branch must be a non-empty string');
    expect(refused('createBranch', { branch: '' })).toBe('body.branch must be a non-empty string');
    expect(refused('createBranch', { branch: 'x', ttl: 48 })).toBe('body.ttl must be a string');
    expect(refused('propose', { branch: 'x', checks: 'links,schema' })).toBe('body.checks must be a list of strings');
    expect(refused('memoryIndex', { check: 'yes' })).toBe('body.check must be true or false');
    expect(refused('briefing', { maxTokens: '2000' })).toBe('body.maxTokens must be a number');
    expect(refused('memoryImport', { files: {} })).toMatch(/^body\.files must be a list of \{name, content\}/);
    expect(refused('memoryImport', { files: [{ name: 'a.md', content: 'eA==' }, { content: 'eA==' }] })).toBe('body.files[1].name must be a non-empty string');
    expect(refused('memoryImport', { files: [{ name: 'a.md', content: 7 }] })).toBe('body.files[0].content must be a string (base64)');
    expect(refused('memoryImport', { files: ['a.md'] })).toBe('body.files[0] must be an object {name, content}');
  });

  it("keeps the CLI's words where the daemon has always used them", () => {
    expect(refused('issueLease', { branch: 'leases', budget: 'lots' })).toBe('body.budget: --budget must be a whole number of bytes (0 or more)');
  });

  it('refuses a body that is not an object, and fields the route does not take', () => {
    for (const body of [null, [], 'x', 3]) expect(refused('sync', body)).toBe('request body is not a JSON object');
    expect(refused('sync', { brnach: 'x' })).toBe('body.brnach is not a field of POST /v1/homes/:role/sync (it takes branch)');
    expect(refused('approvePr', { why: 'x' })).toBe('body.why is not a field of POST /v1/homes/:role/prs/:id/approve (it takes none)');
  });

  it('passes a good body through, with optional fields not given left out', () => {
    expect(validateBody('createBranch', { branch: 'draft', from: 'main', ttl: '', run: null })).toEqual({ branch: 'draft', from: 'main' });
    expect(validateBody('issueLease', { branch: 'b', budget: 0, scopes: 'write' })).toEqual({ branch: 'b', budget: 0, scopes: 'write' });
    expect(validateBody('memoryIndex', { check: false })).toEqual({ check: false });
    expect(validateBody('memoryMeasure', { tasks: ['memory/a.md'] })).toEqual({ tasks: ['memory/a.md'] });
    expect(validateBody('memoryImport', { branch: 'b', files: [{ name: 'a.md', content: 'eA==' }] })).toEqual({ branch: 'b', files: [{ name: 'a.md', content: 'eA==' }] });
    expect(validateBody('status', {})).toEqual({});
  });
});

describe('routing', () => {
  it('matches every route from the path the client builds, parameters decoded', () => {
    for (const name of ROUTE_NAMES) {
      const params = Object.fromEntries([...ROUTES[name].path.matchAll(/:(\w+)/g)].map(([, p]) => [p, `${p} 1/é`]));
      const path = fillPath(name, params as never);
      expect(path).not.toMatch(/[: ]/);
      expect(matchRoute(ROUTES[name].method, path)).toEqual({ name, params });
    }
  });

  it('prefers a literal segment to a parameter, and answers nothing for unknown paths or methods', () => {
    expect(matchRoute('GET', '/v1/homes/demo/prs/stats')).toEqual({ name: 'prStats', params: { role: 'demo' } });
    expect(matchRoute('GET', '/v1/homes/demo/prs/7')).toEqual({ name: 'showPr', params: { role: 'demo', id: '7' } });
    expect(matchRoute('DELETE', '/v1/homes/demo/prs/7')).toBeUndefined();
    expect(matchRoute('GET', '/v1/homes/demo/nothing')).toBeUndefined();
    expect(matchRoute('GET', '/v1/status/')).toBeUndefined();
    expect(() => matchRoute('GET', '/v1/homes/%E0%A4%A/branches')).toThrow(/role in the path is not valid URI encoding/);
  });
});

describe('coverage of the contract', () => {
  it('has a handler for every route, and no handler without one', () => {
    expect(Object.keys(handlers({} as Workflows, {} as WebLogins, '/nonexistent')).sort()).toEqual([...ROUTE_NAMES].sort());
  });

  /** Routes no nas command calls as its own, and why. */
  const NOT_IN_CLI: Partial<Record<RouteName, string>> = {
    attachRun: 'nas run calls it once the run\'s namespace exists',
    finishRun: 'nas run calls it when the command has ended',
    prFile: "the web page's links to a PR's files (nas pr show prints the patch)",
  };

  it('has a CLI command for every route (or a stated reason), and every command calls a route', () => {
    const used = new Set(COMMANDS.map((c) => c.route));
    for (const name of ROUTE_NAMES) expect([name, used.has(name) || name in NOT_IN_CLI]).toEqual([name, true]);
    for (const c of COMMANDS) expect(ROUTE_NAMES).toContain(c.route);
    expect(new Set(COMMANDS.map((c) => c.name)).size).toBe(COMMANDS.length);
  });

  /** One command line per command, as a person would type it. */
  const LINES: Record<string, string[]> = {
    'status': ['status'],
    'home create': ['home', 'create', 'writer', '--template', 'default', '--owner', 'alice'],
    'home list': ['home', 'list'],
    'home config': ['home', 'config', 'demo', '.nas/policy.yaml', '--from', import.meta.filename, '--intent', 'stricter'],
    'branch create': ['branch', 'create', 'demo/draft', '--from', 'main', '--ttl', '2h', '--run', 'r1'],
    'branch list': ['branch', 'list', 'demo'],
    'branch discard': ['branch', 'discard', 'demo/draft'],
    'branch extend': ['branch', 'extend', 'demo/draft', '--ttl', '24h'],
    'branch update': ['branch', 'update', 'demo/draft'],
    'branch resolve': ['branch', 'resolve', 'demo/draft', 'outbox/x.bin', '--take', 'main'],
    'maintenance run': ['maintenance', 'run', 'demo'],
    'export': ['export', 'demo', '/tmp/demo.bundle'],
    'home adopt': ['home', 'adopt', 'demo', 'https://git.example/repo.git', '--owner', 'alice'],
    'home archive': ['home', 'archive', 'demo'],
    'pr inbox': ['pr', 'inbox'],
    'web open': ['web', 'open'],
    'remote add': ['remote', 'add', 'demo', 'git://127.0.0.1/demo.git'],
    'remote list': ['remote', 'list', 'demo'],
    'remote remove': ['remote', 'remove', 'demo', 'git://127.0.0.1/demo.git'],
    'home unarchive': ['home', 'unarchive', 'demo'],
    'home retire': ['home', 'retire', 'demo', '--successor', 'writer'],
    'import': ['import', '/tmp/demo.bundle', '--as', 'copy'],
    'sync': ['sync', 'demo/draft'],
    'trash list': ['trash', 'list', 'demo'],
    'trash purge': ['trash', 'purge', 'demo', '--older-than', '7d'],
    'trash restore': ['trash', 'restore', 'demo', 'outbox/x.md', '--branch', 'draft', '--to', 'outbox/y.md', '--id', 'abc'],
    'lease issue': ['lease', 'issue', 'demo/draft', '--principal', 'alice', '--ttl', '2h', '--scopes', 'write', '--budget', '1000'],
    'lease list': ['lease', 'list', 'demo'],
    'lease revoke': ['lease', 'revoke', 'demo', 'l-0123456789ab'],
    'propose': ['propose', 'demo/draft', '--into', 'main', '--intent', 'notes', '--checks', 'links, schema,'],
    'pr list': ['pr', 'list', 'demo'],
    'pr show': ['pr', 'show', 'demo', '1'],
    'pr approve': ['pr', 'approve', 'demo', '1'],
    'pr reject': ['pr', 'reject', 'demo', '1', '--why', 'no'],
    'pr revert': ['pr', 'revert', 'demo', '1'],
    'pr stats': ['pr', 'stats', 'demo'],
    'memory check': ['memory', 'check', 'demo@draft'],
    'memory index': ['memory', 'index', 'demo@draft', '--check'],
    'memory measure': ['memory', 'measure', 'demo', '--task', 'memory/a.md', '--task', 'memory/b.md'],
    'memory review': ['memory', 'review', 'demo', 'memory/quarantine/a.md', '--description', 'When a.'],
    'memory import': ['memory', 'import', 'demo@draft', import.meta.filename],
    'memory share': ['memory', 'share', 'demo', 'memory/notes/a.md', '--to', 'team'],
    'context': ['context', 'demo@draft'],
    'briefing': ['briefing', 'demo', '--max-tokens', '500'],
    'run': ['run', 'demo', '--user', 'nobody', '--intent', 'notes', '--ttl', '2h', '--budget', '50M', '--cwd', 'workspace',
      '--attempts', '2', '--env', 'ANTHROPIC_API_KEY', '--propose-on-failure', '--', 'true', '--json'],
    'run list': ['run', 'list', 'demo'],
    'run pick': ['run', 'pick', 'demo', 't0123abcd', 'r0123abcd'],
    'hook session-start': ['hook', 'session-start', 'demo@draft', '--max-tokens', '800'],
    'checkpoint create': ['checkpoint', 'create', 'demo@draft', 'before-refactor', '--message', 'safe point'],
    'checkpoint list': ['checkpoint', 'list', 'demo'],
    'checkpoint delete': ['checkpoint', 'delete', 'demo', 'before-refactor'],
    'restore': ['restore', 'demo@draft', 'before-refactor', '--path', 'outbox', '--path', 'memory/notes'],
    'log': ['log', 'demo@draft', 'outbox', '--limit', '20'],
    'diff': ['diff', 'demo@draft', 'before-refactor', 'abc1234', '--path', 'outbox'],
    'why': ['why', '/agents/demo/AGENTS.md', '--limit', '5'],
    'share smb': ['share', 'smb', '--print'],
    'cluster status': ['cluster', 'status'],
    'cluster verify': ['cluster', 'verify', 'demo'],
    'cluster writer': ['cluster', 'writer', 'demo', '--move-to', 'nas-b'],
    'cluster leave': ['cluster', 'leave', '--drain'],
    'cluster join': ['cluster', 'join'],
    'branch move': ['branch', 'move', 'demo@draft', '--to', 'nas-b', '--force'],
  };

  it("builds, for every command, a request the daemon's validation accepts", async () => {
    expect(Object.keys(LINES).sort()).toEqual(COMMANDS.map((c) => c.name).sort());
    for (const c of COMMANDS) {
      const args = parse(LINES[c.name], '/nonexistent.sock');
      for (const f of args.given()) expect(c.flags).toContain(f);
      let sent: { route: string; path: string; body: unknown } | undefined;
      const call = async (route: RouteName, params: never, body: unknown) => {
        // What goes over the wire, checked as the daemon checks it.
        const wire = JSON.parse(JSON.stringify(body));
        sent = { route, path: fillPath(route, params), body: validateBody(route, wire) };
        throw new Error('sent');
      };
      await expect(c.run(args, call as never)).rejects.toThrow('sent');
      expect(sent?.route).toBe(c.route);
      expect(matchRoute(ROUTES[c.route].method, sent!.path)?.name).toBe(c.route);
    }
  });

  it('sends the lists the daemon takes: checks split on commas, every --task', async () => {
    const bodies: Record<string, unknown> = {};
    const call = async (route: RouteName, _params: never, body: unknown) => {
      bodies[route] = body;
      throw new Error('sent');
    };
    for (const name of ['propose', 'memory measure']) {
      const c = COMMANDS.find((x) => x.name === name)!;
      await c.run(parse(LINES[name], '/nonexistent.sock'), call as never).catch(() => undefined);
    }
    expect(bodies.propose).toEqual({ branch: 'draft', intent: 'notes', checks: ['links', 'schema'] });
    expect(bodies.memoryMeasure).toEqual({ branch: undefined, tasks: ['memory/a.md', 'memory/b.md'] });
  });
});

/** The table over workflows that record what they were asked: the rule is checked before the handler runs. */
function table() {
  const asked: unknown[][] = [];
  /** The Homes whose views the mount was told changed (null: every Home's). */
  const changed: (string | null)[] = [];
  const record = (what: string, answer: unknown = what) => async (...args: unknown[]) => (asked.push([what, ...args]), answer);
  const flows = {
    leases: { authorize: record('authorize', { principal: 'p' }), revokeBranch: record('revokeBranch', []) },
    trash: { trashRestore: record('trashRestore') },
    homes: { createHome: record('createHome'), viewsChanged: async (role: string | null) => void changed.push(role) },
    branches: { discardBranch: record('discardBranch', {}), updateBranch: record('updateBranch'), sync: record('sync'), listBranches: record('listBranches', []) },
    memory: { import: record('import'), index: record('index') },
    prs: { propose: record('propose') },
    maintenance: { run: record('maintenance', []) },
    log: { info: () => undefined },
  } as unknown as Workflows;
  return { asked, changed, call: handlers(flows, {} as WebLogins, '/state') };
}

describe('who may call', () => {
  it('declares for every route a rule whose branch and flag the route carries', () => {
    for (const name of ROUTE_NAMES) {
      const { path: pattern, body, who }: RouteSpec = ROUTES[name];
      const fields: Record<string, unknown> = body;
      if (who === 'anyone') continue;
      if ('owner' in who) expect([name, who.owner.length > 0]).toEqual([name, true]);
      else if ('workflow' in who) expect([name, who.workflow.length > 0]).toEqual([name, true]);
      else {
        expect([name, pattern.includes('/:role/')]).toEqual([name, true]);
        if (who.branch === 'path') expect([name, pattern]).toEqual([name, expect.stringContaining('/:branch/')]);
        else expect([name, fields.branch]).toEqual([name, 'string?']);
        if (who.readOnlyIf) expect([name, fields[who.readOnlyIf]]).toEqual([name, 'boolean?']);
        expect([name, who.action]).toEqual([name, expect.stringContaining('{branch}')]);
      }
    }
  });

  const lease: Credentials = { owner: false, lease: 't' };

  it('refuses an owner action before its handler, in the words and status the CLI knows', async () => {
    const { asked, call } = table();
    const refused = await Promise.resolve(call.createHome({ params: {}, body: { role: 'x' }, creds: lease })).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UserError);
    expect((refused as UserError).status).toBe(403);
    expect((refused as Error).message).toMatch(/^creating a Home is an owner action: it needs the owner credential \(\/state\/owner\.token, /);
    expect(asked).toEqual([]);
    expect(await call.createHome({ params: {}, body: { role: 'x' }, creds: { owner: true } })).toBe('createHome');
  });

  it('asks the leases about the branch the request names, and only then runs the handler', async () => {
    const { asked, call } = table();
    await call.discardBranch({ params: { role: 'demo', branch: 'b' }, body: {}, creds: lease });
    await call.updateBranch({ params: { role: 'demo', branch: 'b' }, body: {}, creds: lease });
    await call.memoryImport({ params: { role: 'demo' }, body: { branch: 'b', files: [] }, creds: lease });
    await call.memoryIndex({ params: { role: 'demo' }, body: { branch: 'b' }, creds: lease });
    expect(asked.map(([what, ...args]) => (what === 'authorize' ? [what, ...args] : what))).toEqual([
      ['authorize', 'demo', 'b', 'write', lease, 'discarding demo/b'], 'discardBranch', 'revokeBranch',
      ['authorize', 'demo', 'b', 'write', lease, 'updating demo/b from main'], 'updateBranch',
      ['authorize', 'demo', 'b', 'write', lease, 'importing notes in demo/b'], 'import',
      ['authorize', 'demo', 'b', 'write', lease, 'regenerating indexes in demo/b'], 'index',
    ]);
  });

  it('asks nothing for main, no branch, a read, or a rule its workflow checks', async () => {
    const { asked, call } = table();
    await call.memoryImport({ params: { role: 'demo' }, body: { files: [] }, creds: lease });
    await call.memoryImport({ params: { role: 'demo' }, body: { branch: 'main', files: [] }, creds: lease });
    await call.memoryIndex({ params: { role: 'demo' }, body: { branch: 'b', check: true }, creds: lease });
    await call.restoreTrash({ params: { role: 'demo' }, body: { path: 'x', branch: 'main' }, creds: lease });
    // A restore's branch may be its record's: the trash workflow decides from the request and the record first.
    await call.restoreTrash({ params: { role: 'demo' }, body: { path: 'x' }, creds: lease });
    await call.propose({ params: { role: 'demo' }, body: { branch: 'b' }, creds: lease });
    expect(asked.map(([what]) => what)).toEqual(['import', 'import', 'index', 'trashRestore', 'trashRestore', 'propose']);
  });
});

describe('what a request does to the views', () => {
  it('tells the mount of a route that changes views (its Home, or every Home), and nothing of one that keeps them', async () => {
    const { changed, call } = table();
    const owner: Credentials = { owner: true };
    await call.sync({ params: { role: 'demo' }, body: { branch: 'b' }, creds: owner });
    await call.listBranches({ params: { role: 'demo' }, body: {}, creds: owner });
    expect(changed).toEqual([]);
    await call.discardBranch({ params: { role: 'demo', branch: 'b' }, body: {}, creds: owner });
    // A route without a Home in its path changes every Home's.
    await call.maintenance({ params: {}, body: {}, creds: owner });
    expect(changed).toEqual(['demo', null]);
  });
});

describe('the web page', () => {
  // The page's scripts, as index.html loads them.
  const app = ['home.js', 'app.js'].map((f) => fs.readFileSync(path.resolve(import.meta.dirname, `../../src/web/${f}`), 'utf8')).join('\n');
  /** A template's `${...}` parts as one path segment. */
  const filled = (p: string) => p.replace(/\$\{[^}]*\}/g, 'x');

  /** Every call app.js makes to the control API: get(path) and live(path) are GETs; api(method, path, body). */
  function calls(): { method: string; path: string; fields: string[] }[] {
    const out: { method: string; path: string; fields: string[] }[] = [];
    for (const m of app.matchAll(/\b(?:get|live)\(\s*(['`])(\/v1[^'`]*)\1/g)) out.push({ method: 'GET', path: filled(m[2]), fields: [] });
    // A link the browser follows (a PR's file) is a GET through the session too.
    for (const m of app.matchAll(/`\/api(\/v1[^`]*)`/g)) out.push({ method: 'GET', path: filled(m[1]), fields: [] });
    for (const m of app.matchAll(/\bapi\(\s*'(GET|POST)',\s*(['`])(\/v1[^'`]*)\2(?:,\s*\{([^{}]*)\})?/g)) {
      out.push({ method: m[1], path: filled(m[3]), fields: [...(m[4] ?? '').matchAll(/(\w+)\s*:/g)].map((f) => f[1]) });
    }
    return out;
  }

  it('calls only routes of the contract marked for the web, with fields they take', () => {
    const found = calls();
    // Every API path in the script is one of the calls read above: none reaches the API another way.
    expect(found.length).toBe([...app.matchAll(/\/v1\//g)].length);
    expect(found.length).toBeGreaterThan(0);
    for (const c of found) {
      const route = matchRoute(c.method, c.path);
      expect([c.method, c.path, route && (ROUTES[route.name] as RouteSpec).web]).toEqual([c.method, c.path, true]);
      for (const f of c.fields) expect([route!.name, f in ROUTES[route!.name].body]).toEqual([route!.name, true]);
    }
  });

  it('fetches only through api(), and its own logout', () => {
    expect([...app.matchAll(/\bfetch\(\s*([^,]+),/g)].map((m) => m[1])).toEqual(['`/api${path}`', "'/logout'"]);
  });

  it("marks for the web only reads and the owner's decisions", () => {
    const web = ROUTE_NAMES.filter((n) => (ROUTES[n] as RouteSpec).web);
    const decisions = web.filter((n) => ROUTES[n].method === 'POST' && ROUTES[n].who !== 'anyone');
    expect(decisions.sort()).toEqual(['approvePr', 'rejectPr', 'resolveBranch', 'restoreTrash', 'revertPr']);
  });
});
