#!/usr/bin/env node
import { DEFAULT_SOCKET, client, type Call } from '../api/client.js';
import { printable } from '../util/display.js';
import { Usage, parse, type Args } from './args.js';
import { helpFor, lookup } from './commands/index.js';
import { credentialHeaders, ownerTokenFile, ownerTokenNamed, ownerWouldDo, readToken } from './credentials.js';
import { version } from '../util/version.js';

/**
 * nas: a thin client of nasd's control socket. Exit codes: 0 done, 1 failed (or a check found errors),
 * 2 a usage mistake (printed with the usage of the command).
 */

/**
 * The client, with the owner's token of the daemon it talks to, found the same way for every command: when a
 * request the owner credential would let through is refused (ownerWouldDo) and the caller did not name a token,
 * nas asks the daemon for its state directory, reads the token there, and tries once more (such a refusal
 * changed nothing). The error names the files read.
 */
function ownerAware(socket: string): Call {
  const headers = credentialHeaders();
  const base = client({ socket, headers });
  let owner: string | undefined;
  return async (route, params, body, extra = {}) => {
    try {
      return await base(route, params, body, { ...(owner ? { 'x-nas-owner': owner } : {}), ...extra });
    } catch (e) {
      if (!ownerWouldDo(e) || ownerTokenNamed()) throw e;
      const file = `${(await base('status', {}, {})).state_dir}/owner.token`;
      owner = file === ownerTokenFile() ? undefined : readToken(file);
      if (!owner) throw new Error(`${(e as Error).message} (nas read ${ownerTokenFile()}${file === ownerTokenFile() ? '' : ` and ${file}`})`);
      return base(route, params, body, { 'x-nas-owner': owner, ...extra });
    }
  };
}

async function run(args: Args): Promise<number> {
  const cmd = lookup(args.positional);
  if (!cmd) throw new Usage(args.positional.length ? `unknown command: ${args.positional.slice(0, 2).join(' ')}` : 'no command given');
  const wrong = args.given().find((f) => !cmd.flags.includes(f));
  if (wrong) throw new Usage(`${cmd.name} does not take --${wrong}`);
  const out = await cmd.run(args, ownerAware(args.socket));
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
