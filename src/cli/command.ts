import type { Call } from '../api/client.js';
import type { Body, Params, Result, RouteName } from '../api/contract.js';
import { printable } from '../util/display.js';
import type { Args, Flag } from './args.js';

/**
 * A command's row in the CLI reference (docs/cli.md, written by scripts/gen-cli-reference.mjs from this table):
 * how it is called (every option it takes named) and what it does, in Markdown.
 */
export interface Doc {
  usage: string;
  about: string;
}

/** One row of the command table: how a command line becomes a request, and the answer becomes output. */
export interface CommandSpec<K extends RouteName> {
  /** What follows `nas`: a word (`status`) or a family and a verb (`branch create`). */
  name: string;
  doc: Doc;
  /** The control API route it calls. */
  route: K;
  /** Options it takes besides --json, --help and --socket. */
  flags?: readonly Flag[];
  /** The request, from the arguments; a Usage error when they are wrong. */
  request(args: Args): { params: Params<K>; body: Body<K> } | Promise<{ params: Params<K>; body: Body<K> }>;
  /** The part of the answer the options ask for (filters): what --json prints and `print` gets; all of it without. */
  shown?(result: Result<K>, args: Args): Result<K>;
  /** The answer as text for a person (--json prints the answer itself). */
  print(result: Result<K>, args: Args): string;
  /** Said on stderr before the text, so stdout stays what a script captures. */
  notice?(result: Result<K>, args: Args): string;
  /** Whether this answer exits 1 (a check failed, a merge conflicted). */
  failed?(result: Result<K>, args: Args): boolean;
}

export interface Output {
  stdout: string;
  stderr: string;
  failed: boolean;
  /** The exit status, when it is not 0 or 1 by `failed` (nas run passes its command's on). */
  code?: number;
}

/** A command with its route's types closed over, so commands of every route fit in one table. */
export interface Command {
  name: string;
  doc: Doc;
  route: RouteName;
  flags: readonly Flag[];
  run(args: Args, call: Call): Promise<Output>;
}

export function command<K extends RouteName>(spec: CommandSpec<K>): Command {
  return {
    name: spec.name,
    doc: spec.doc,
    route: spec.route,
    flags: spec.flags ?? [],
    async run(args, call) {
      const { params, body } = await spec.request(args);
      const answer = await call(spec.route, params, body);
      const result = spec.shown ? spec.shown(answer, args) : answer;
      const failed = spec.failed?.(result, args) ?? false;
      if (args.json) return { stdout: JSON.stringify(result, null, 2) + '\n', stderr: '', failed };
      // What a run wrote (intents, diffs, names) cannot move the cursor or forge lines.
      return { stdout: printable(spec.print(result, args)), stderr: printable(spec.notice?.(result, args) ?? ''), failed };
    },
  };
}
