import { command } from '../command.js';

export const help = {
  web:
    'usage: nas web open\n\nowner: print a one-time login link for the web page, where the owner reviews PRs (the decision inbox,\n' +
    'each PR\'s diff, reads and checks, approve and reject), Homes, branches, the recycle area and history. The link\n' +
    'works once, for 5 minutes, and buys a 12-hour session. nasd serves the page on web_listen (127.0.0.1:7465).\n',
};

export const commands = [
  command({
    name: 'web open',
    doc: {
      usage: 'nas web open',
      about: 'owner: a one-time login link for the web page ([the Human Gate in a ' +
        'browser](guide.md#the-human-gate-in-a-browser))',
    },
    route: 'webLogin',
    request: () => ({ params: {}, body: {} }),
    print: (r) => `${r.url}\n(one-time link, valid until ${r.expires})\n`,
  }),
];
