import { UserError } from './errors.js';

/**
 * The repositories nasd hands to git (a remote to mirror to, a repository to adopt): an https://, ssh://, git://
 * or file:// URL, or an absolute path. A `<helper>::<address>` URL, or another scheme, would have git run a
 * remote helper as root; git is also run with only these transports allowed (store/git-commands.ts).
 */
const GIT_URL = /^(?:(?:https|ssh|git|file):\/\/[^-]|\/)/;

/** `url` when git may be given it; otherwise a refusal that names `what` it is and what to give instead. */
export function checkGitUrl(url: string, what: string): string {
  if (!GIT_URL.test(url) || /[\x00-\x1f\x7f\s]/.test(url)) {
    throw new UserError(`${what} ${JSON.stringify(url).slice(0, 80)}: give an https://, ssh://, git:// or file:// URL, or an absolute path ` +
      '(git runs a program for any other kind, such as <helper>::<address>, and nasd runs git as root)');
  }
  return url;
}
