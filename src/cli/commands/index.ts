import type { Command } from '../command.js';
import { OVERVIEW } from '../overview.js';
import * as branch from './branch.js';
import * as context from './context.js';
import * as home from './home.js';
import * as lease from './lease.js';
import * as memory from './memory.js';
import * as pr from './pr.js';
import * as status from './status.js';
import * as sync from './sync.js';
import * as trash from './trash.js';
import * as run from './run.js';
import * as hook from './hook.js';
import * as checkpoint from './checkpoint.js';
import * as maintenance from './maintenance.js';
import * as remote from './remote.js';
import * as web from './web.js';
import * as why from './why.js';
import * as share from './share.js';
import * as cluster from './cluster.js';

/** The command table: every command nas knows, and the help for each family (`nas <family> --help`). */

const FAMILIES = [status, home, branch, sync, trash, lease, pr, memory, context, run, hook, checkpoint, maintenance, remote, web, why, share, cluster];

export const COMMANDS: readonly Command[] = FAMILIES.flatMap((f) => f.commands);

const HELP: Readonly<Record<string, string>> = Object.assign({}, ...FAMILIES.map((f) => f.help));

/** The words `nas <word> --help` explains, family by family: the sections of the CLI reference (docs/cli.md). */
export const HELP_WORDS: readonly string[] = Object.keys(HELP);

/** The help of the family a word names (`nas branch --help`), else the overview. */
export function helpFor(word?: string): string {
  return word !== undefined && Object.hasOwn(HELP, word) ? HELP[word] : OVERVIEW;
}

/** The command a command line names (`branch create`, `sync`; `run list` before `run <role>`), or undefined. */
export function lookup(positional: readonly string[]): Command | undefined {
  const [word, verb] = positional;
  return COMMANDS.find((c) => c.name === `${word} ${verb ?? ''}`) ?? COMMANDS.find((c) => c.name === word);
}
