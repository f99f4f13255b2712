/** The command line: options, positional arguments, and the usage errors (exit 2) they can raise. */

/** A mistake in how nas was called: printed with the command's usage, exit 2. */
export class Usage extends Error {}

/**
 * Every option a command may take. `value`: takes the next argument (the last one given wins); `list`: may
 * be given more than once; `switch`: takes nothing. `needs` is what a missing value is called.
 */
interface FlagSpec {
  takes: 'value' | 'list' | 'switch';
  needs?: string;
}

const FLAGS = {
  template: { takes: 'value' },
  owner: { takes: 'value' },
  from: { takes: 'value' },
  ttl: { takes: 'value' },
  run: { takes: 'value' },
  branch: { takes: 'value' },
  to: { takes: 'value' },
  id: { takes: 'value' },
  'max-tokens': { takes: 'value' },
  description: { takes: 'value' },
  principal: { takes: 'value' },
  scopes: { takes: 'value' },
  budget: { takes: 'value' },
  into: { takes: 'value' },
  intent: { takes: 'value' },
  checks: { takes: 'value' },
  why: { takes: 'value' },
  task: { takes: 'list', needs: 'a path' },
  path: { takes: 'list', needs: 'a path' },
  message: { takes: 'value' },
  limit: { takes: 'value' },
  'older-than': { takes: 'value' },
  as: { takes: 'value' },
  successor: { takes: 'value' },
  check: { takes: 'switch' },
  user: { takes: 'value' },
  attempts: { takes: 'value' },
  cwd: { takes: 'value' },
  env: { takes: 'list', needs: 'a variable name' },
  propose: { takes: 'switch' },
  'no-propose': { takes: 'switch' },
  'propose-on-failure': { takes: 'switch' },
  egress: { takes: 'switch' },
  print: { takes: 'switch' },
  'smb-conf': { takes: 'value', needs: 'a file' },
  search: { takes: 'value', needs: 'text to find in paths' },
  since: { takes: 'value', needs: 'a duration such as 2d' },
  all: { takes: 'switch' },
  'move-to': { takes: 'value', needs: 'a host name (or any)' },
  drain: { takes: 'switch' },
  force: { takes: 'switch' },
  take: { takes: 'value', needs: 'a side: branch or main' },
} as const satisfies Record<string, FlagSpec>;

export type Flag = keyof typeof FLAGS;
type FlagsTaking<T> = { [F in Flag]: (typeof FLAGS)[F]['takes'] extends T ? F : never }[Flag];
export type ValueFlag = FlagsTaking<'value'>;
export type ListFlag = FlagsTaking<'list'>;
export type SwitchFlag = FlagsTaking<'switch'>;

const isFlag = (name: string): name is Flag => Object.hasOwn(FLAGS, name);

export class Args {
  readonly positional: string[] = [];
  /** What follows `--`: a command line to run (nas run), taken as it is. */
  rest: string[] | null = null;
  json = false;
  help = false;
  version = false;
  private readonly values = new Map<Flag, string[]>();

  constructor(public socket: string) {}

  value(flag: ValueFlag): string | undefined {
    return this.values.get(flag)?.at(-1);
  }

  list(flag: ListFlag): string[] {
    return this.values.get(flag) ?? [];
  }

  has(flag: SwitchFlag): boolean {
    return this.values.has(flag);
  }

  /** The options given, for the command to refuse those it does not take. */
  given(): Flag[] {
    return [...this.values.keys()];
  }

  add(flag: Flag, value: string): void {
    this.values.set(flag, [...(this.values.get(flag) ?? []), value]);
  }

  /** Positional argument `index` (0 is the command), or a usage error naming what is missing. */
  need(index: number, what: string): string {
    const v = this.positional[index];
    if (!v) throw new Usage(`missing ${what}`);
    return v;
  }
}

export function parse(argv: string[], socket: string): Args {
  const args = new Args(socket);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = (needs: string) => {
      const v = argv[++i];
      if (v === undefined) throw new Usage(`${a} needs ${needs}`);
      return v;
    };
    if (a === '--') {
      args.rest = argv.slice(i + 1);
      break;
    }
    if (a === '--json') args.json = true;
    else if (a === '--help' || a === '-h') args.help = true;
    else if (a === '--version') args.version = true;
    else if (a === '--socket') args.socket = next('a value');
    else if (a.startsWith('--')) {
      const name = a.slice(2);
      if (!isFlag(name)) throw new Usage(`unknown option ${a}`);
      const spec: FlagSpec = FLAGS[name];
      args.add(name, spec.takes === 'switch' ? '' : next(spec.needs ?? 'a value'));
    } else args.positional.push(a);
  }
  return args;
}

/** `role/branch` (or `role`): the Home, and the branch after the first slash. */
export function splitSpec(spec: string): [string, string | undefined] {
  const slash = spec.indexOf('/');
  return slash < 0 ? [spec, undefined] : [spec.slice(0, slash), spec.slice(slash + 1)];
}

/** `role`, `role@branch` or `role/branch`. */
export function splitTarget(spec: string): [string, string | undefined] {
  const at = spec.search(/[@/]/);
  return at < 0 ? [spec, undefined] : [spec.slice(0, at), spec.slice(at + 1)];
}

/** Positional `index` as `<role>/<branch>`, both required. */
export function branchSpec(args: Args, index: number): [string, string] {
  const [role, branch] = splitSpec(args.need(index, '<role>/<branch>'));
  if (!branch) throw new Usage('expected <role>/<branch>');
  return [role, branch];
}

/** A flag's value as a whole number, or a usage error with `message`. */
export function wholeNumber(args: Args, flag: ValueFlag, message: string): number | undefined {
  const v = args.value(flag);
  if (v !== undefined && !/^\d+$/.test(v)) throw new Usage(message);
  return v === undefined ? undefined : Number(v);
}
