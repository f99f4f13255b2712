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

/** The command table: every command nas knows, and the help for each family (`nas <family> --help`). */

const FAMILIES = [status, home, branch, sync, trash, lease, pr, memory, context];

export const COMMANDS: readonly Command[] = FAMILIES.flatMap((f) => f.commands);

const HELP: Readonly<Record<string, string>> = Object.assign({}, ...FAMILIES.map((f) => f.help));

/** The help of the family a word names (`nas branch --help`), else the overview. */
export function helpFor(word?: string): string {
  return word !== undefined && Object.hasOwn(HELP, word) ? HELP[word] : OVERVIEW;
}

/** Words that take a verb after them (`branch create`): the others are whole commands (`sync`). */
const WITH_VERB = new Set(COMMANDS.filter((c) => c.name.includes(' ')).map((c) => c.name.split(' ')[0]));

/** The command a command line names, or undefined. */
export function lookup(positional: readonly string[]): Command | undefined {
  const [word, verb] = positional;
  const name = WITH_VERB.has(word) ? `${word} ${verb ?? ''}` : word;
  return COMMANDS.find((c) => c.name === name);
}
