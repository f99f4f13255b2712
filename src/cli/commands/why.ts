import path from 'node:path';
import { wholeNumber } from '../args.js';
import { command } from '../command.js';
import type { WhyReport } from '../../api/types.js';

export const help = {
  why:
    'usage: nas why [<path>] [--limit N]\n\n' +
    'Why the mount refused something: the newest refusals (EROFS, EPERM, EACCES, EDQUOT...) of the path or anything under\n' +
    'it, newest first, each with its reason and what to do instead. <path> is a path under the mount (/agents/demo/AGENTS.md),\n' +
    'one relative to here (./x, ../x), or <role>[@<branch>]/<path>; none: every path. nasd keeps the last refusals in memory\n' +
    "only. You see your own: root (the owner) sees every user's, a run its user's, NAS_LEASE its principal's.\n" +
    'For a path in a read-only view (main, history, a branch held elsewhere or expired) the first line, to anyone, says\n' +
    'what it is and where to write: there the kernel answers "Permission denied" itself to a user the mode bits keep out.\n',
};

/** A path as the daemon takes it: absolute (under the mount), or `<role>[@<branch>]/<rel>`; ./ and ../ are from here. */
function asked(arg: string | undefined): string | undefined {
  if (arg === undefined) return undefined;
  return arg === '.' || arg === '..' || arg.startsWith('./') || arg.startsWith('../') ? path.resolve(arg) : arg;
}

export const commands = [
  command({
    name: 'why',
    doc: {
      usage: 'nas why [<path>] [--limit N]',
      about: 'why the mount refused something at a path (or under it): the newest refusals, each with its errno, who ' +
        'and the reason with what to do instead',
    },
    route: 'why',
    flags: ['limit'],
    request: (args) => ({ params: {}, body: { path: asked(args.positional[1]), limit: wholeNumber(args, 'limit', '--limit takes a whole number') } }),
    // A read-only view's line comes first, for anyone: it explains a refusal the kernel gave before nasd saw it.
    print: (r) => (r.readOnly ? `${r.readOnly}\n` : '') + refusals(r),
  }),
];

/** The refusals listed, as the caller may see them. */
function refusals(r: WhyReport): string {
  const what = r.path ?? 'any path';
  if (r.shown === 'none') {
    return `nasd shows refusals only to whom they happened, and cannot tell who you are: run nas as root (the owner), inside the run, or with NAS_LEASE set\n`;
  }
  if (r.refusals.length === 0) return `no refusal recorded for ${what} (nasd keeps the last ones in memory, since it started)\n`;
  return r.refusals
    .map((f) => {
      const who = f.uid === undefined ? '' : ` by uid ${f.uid}${f.pid ? ` (pid ${f.pid})` : ''}`;
      return `${f.at} ${f.op} ${f.path}${f.other ? ` -> ${f.other}` : ''}: ${f.code}${who}\n  ${f.why}\n`;
    })
    .join('');
}
