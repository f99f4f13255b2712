import { printable } from '../../util/display.js';
import { Usage } from '../args.js';
import type { Command } from '../command.js';
import { DEFAULT_SMB_CONF, SHARE, describe, install, render, template } from '../smb-share.js';

export const help = {
  share:
    'usage: nas share smb [--print] [--smb-conf FILE]\n\n' +
    `Share the Homes over SMB with Samba: the share [${SHARE}] (contrib/samba/agent-nas.conf) with path = the running\n` +
    "nasd's mount (asked from nasd), and the settings a FUSE-backed share needs (no oplocks or leases, no streams or\n" +
    'extended attributes, case-sensitive names, file ids from the mount: docs/smb.md says why each).\n\n' +
    '  --print          print the share section, to paste into smb.conf; changes nothing\n' +
    `  (default)        install it (as root): the section as agent-nas.conf beside smb.conf, and an include line in\n` +
    '                   smb.conf, each only if not there already; checked with testparm. Reload smbd afterwards.\n' +
    `  --smb-conf FILE  the smb.conf to install into (${DEFAULT_SMB_CONF})\n\n` +
    'People log in as Unix accounts (smbpasswd -a <account>); what they write in a branch is committed with their\n' +
    'account in Nas-Writers. Main is read-only; a branch takes writes from its owner and a write lease\'s principal.\n',
};

const shareSmb: Command = {
  name: 'share smb',
  doc: {
    usage: 'nas share smb [--print] [--smb-conf FILE]',
    about: 'share the Homes over SMB with Samba: print the `[agents]` section (`path =` the running nasd\'s mount) or' +
      ' install it beside smb.conf with one include line, idempotently, checked with `testparm` ([the Homes ' +
      'over SMB](smb.md))',
  },
  route: 'status',
  flags: ['print', 'smb-conf'],
  async run(args, call) {
    if (args.positional.length > 2) throw new Usage(`unexpected argument: ${args.positional[2]}`);
    if (args.has('print') && args.value('smb-conf') !== undefined) throw new Usage('--print writes nothing: it takes no --smb-conf');
    const { mount } = await call('status', {}, {});
    if (args.has('print')) {
      const text = render(await template(), mount);
      return { stdout: args.json ? JSON.stringify({ share: SHARE, mount, text }, null, 2) + '\n' : text, stderr: '', failed: false };
    }
    const r = await install(mount, args.value('smb-conf') ?? DEFAULT_SMB_CONF);
    return { stdout: args.json ? JSON.stringify(r, null, 2) + '\n' : printable(describe(r)), stderr: '', failed: false };
  },
};

export const commands = [shareSmb];
