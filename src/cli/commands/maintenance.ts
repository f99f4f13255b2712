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
    doc: {
      usage: 'nas maintenance run [<role>]',
      about: 'owner: tidy one Home or all, with a report: expired branches past `branch_grace` go to the recycle area,' +
        ' the recycle area keeps `trash_keep_days`, undecided PRs of a branch that is gone (and missed when it ' +
        'went) become `expired`, and git packs the Store (unreachable objects older than the window, and never ' +
        'younger than an hour, are pruned; nothing reachable from main, a branch, a checkpoint or the recycle ' +
        'area goes). `systemd/nas-maintenance.timer` runs it daily',
    },
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
