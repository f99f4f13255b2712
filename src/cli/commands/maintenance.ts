import { command } from '../command.js';
import { size, table } from '../format.js';

export const help = {
  maintenance:
    'usage: nas maintenance run [<role>]\n\n' +
    'owner: tidy one Home (or every Home) now, and say what was done: expired branches past their grace\n' +
    'period go to the recycle area, the recycle area keeps trash_keep_days, PRs waiting for a branch that is\n' +
    'gone expire, and git packs the Store (unreachable objects older than the window are pruned; nothing\n' +
    'reachable from main, a branch, a checkpoint or the recycle area is ever removed). The systemd timer\n' +
    'nas-maintenance.timer runs it daily; nasd itself applies the recycle window once an hour.\n',
};

export const commands = [
  command({
    name: 'maintenance run',
    route: 'maintenance',
    request: (args) => ({ params: {}, body: { role: args.positional[2] } }),
    print: (r) => table([
      ['HOME', 'PURGED', 'BRANCHES REMOVED', 'PRS EXPIRED', 'LOOSE OBJECTS', 'STORE SIZE', 'MS'],
      ...r.map((m) => [
        m.role, String(m.purged), m.discarded.join(',') || '-', m.expiredPrs.join(',') || '-',
        `${m.objects.before.loose} -> ${m.objects.after.loose}`,
        `${size(m.objects.before.looseBytes + m.objects.before.packBytes)} -> ${size(m.objects.after.looseBytes + m.objects.after.packBytes)}`,
        String(m.ms),
      ]),
    ]),
  }),
];
