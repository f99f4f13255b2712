#!/usr/bin/env node
import { client } from '../api/client.js';
import { DEFAULT_SOCKET } from '../api/client.js';
import { printable } from '../util/display.js';
import { Usage, parse, type Args } from './args.js';
import { helpFor, lookup } from './commands/index.js';
import { credentialHeaders } from './credentials.js';
import { version } from '../util/version.js';

/**
 * nas: a thin client of nasd's control socket. Exit codes: 0 done, 1 failed (or a check found errors),
 * 2 a usage mistake (printed with the usage of the command).
 */

async function run(args: Args): Promise<number> {
  const cmd = lookup(args.positional);
  if (!cmd) throw new Usage(args.positional.length ? `unknown command: ${args.positional.slice(0, 2).join(' ')}` : 'no command given');
  const wrong = args.given().find((f) => !cmd.flags.includes(f));
  if (wrong) throw new Usage(`${cmd.name} does not take --${wrong}`);
  const out = await cmd.run(args, client({ socket: args.socket, headers: credentialHeaders() }));
  process.stderr.write(out.stderr);
  process.stdout.write(out.stdout);
  return out.code ?? (out.failed ? 1 : 0);
}

async function main(): Promise<number> {
  let args: Args;
  try {
    args = parse(process.argv.slice(2), process.env.NAS_SOCKET || DEFAULT_SOCKET);
  } catch (e) {
    process.stderr.write(`nas: ${(e as Error).message}\n\n${helpFor()}`);
    return 2;
  }
  if (args.version) {
    process.stdout.write(`nas ${version()}\n`);
    return 0;
  }
  if (args.help || args.positional.length === 0) {
    process.stdout.write(helpFor(args.positional[0]));
    return args.help ? 0 : 2;
  }
  try {
    return await run(args);
  } catch (e) {
    if (e instanceof Usage) {
      process.stderr.write(`nas: ${e.message}\n\n${helpFor(args.positional[0])}`);
      return 2;
    }
    process.stderr.write(`nas: ${printable((e as Error).message)}\n`);
    return 1;
  }
}

process.exitCode = await main();
