import { command } from '../command.js';
import { short, table } from '../format.js';
import { Usage } from '../args.js';

export const help = {
  cluster:
    'usage: nas cluster status [--json]\n' +
    '       nas cluster verify <role>\n' +
    '       nas cluster writer <role> --move-to <host>|any\n' +
    '       nas cluster leave --drain\n' +
    '       nas cluster join\n\n' +
    'Several hosts serving the same Homes (nasd.yaml cluster:, docs/cluster.md).\n' +
    'status: etcd\'s health, the hosts alive with their version and Homes, and per Home its merge writer and epoch,\n' +
    'main as this host has it, when main was last published, the proposals queued, and whether this host is current.\n' +
    'verify: main on the git server against the queue (no proposal merged twice) and git fsck; exit 1 on a finding.\n' +
    'writer --move-to (owner): the Home\'s merge writer goes to that host at its next idle moment and stays while the\n' +
    'host is up; any gives the choice back. leave --drain (owner): this host hands over every writer role and stands\n' +
    'for none (it still serves its Homes); join undoes it.\n',
};

/** How long ago an ISO time was, in words short enough for a column. */
function age(iso: string | null): string {
  if (!iso) return '-';
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return s < 120 ? `${s}s ago` : s < 7200 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`;
}

export const commands = [
  command({
    name: 'cluster status',
    doc: {
      usage: 'nas cluster status',
      about: 'several hosts serving the same Homes ([several hosts](cluster.md)): etcd\'s health, the live hosts, and ' +
        'per Home its merge writer, main, when main was last published, the proposals queued, and whether this ' +
        'host\'s main is current',
    },
    route: 'clusterStatus',
    request: () => ({ params: {}, body: {} }),
    print: (r) => {
      const etcd = r.etcd.ok ? `etcd: ok (${r.etcd.ms} ms) at ${r.etcd.endpoints.join(', ')}` : `etcd: UNREACHABLE at ${r.etcd.endpoints.join(', ')}: ${r.etcd.error}`;
      const hosts = table([['HOST', 'VERSION', 'HOMES', 'STARTED'], ...r.hosts.map((h) => [`${h.host}${h.self ? ' (this host)' : ''}`, h.version, h.homes === 'all' ? 'all' : h.homes.join(', '), h.started])]);
      const homes = table([['HOME', 'WRITER', 'EPOCH', 'MAIN', 'PUBLISHED', 'QUEUED', 'HERE'],
        ...r.homes.map((h) => [h.role, h.writer ?? '(none)', h.epoch ?? '-', short(h.main ?? '-'), age(h.published), String(h.queued), h.current ? 'current' : 'BEHIND'])]);
      return `this host: ${r.host}\n${etcd}\n\n${hosts}\n${homes}`;
    },
  }),
  command({
    name: 'cluster verify',
    doc: {
      usage: 'nas cluster verify <role>',
      about: 'main on the git server against the queue (no proposal merged twice, via the `Nas-Proposal` trailer of ' +
        'each merge) and git fsck; exit 1 on a finding',
    },
    route: 'clusterVerify',
    request: (args) => ({ params: { role: args.need(2, '<role>') }, body: {} }),
    print: (r) => `Home ${r.home}: main ${short(r.main ?? '-')} on the git server${r.current ? '' : ' (this host trails it)'}\n` +
      `  ${r.merges} proposal(s) merged; merged twice: ${r.twice.length === 0 ? 'none' : r.twice.join(', ')}\n` +
      `  queued: ${r.queued} (${r.queued_on_main} already on main, cleared by the next batch)\n` +
      `  git fsck: ${r.fsck === '' ? 'clean' : r.fsck}\n${r.ok ? 'ok\n' : 'FAILED\n'}`,
    failed: (r) => !r.ok,
  }),
  command({
    name: 'cluster writer',
    doc: {
      usage: 'nas cluster writer <role> --move-to <host>|any',
      about: 'owner: put the Home\'s merge writer on that host at its next idle moment (it stays while the host is up);' +
        ' `--move-to any` gives the choice back',
    },
    route: 'clusterWriter',
    flags: ['move-to'],
    request: (args) => {
      const to = args.value('move-to');
      if (!to) throw new Usage('say where the writer goes: --move-to <host> (or any)');
      return { params: { role: args.need(2, '<role>') }, body: { to } };
    },
    print: (r) => r.preferred === null ? `Home ${r.home}: its writer is chosen by the hosts again (now ${r.writer ?? 'none'})\n`
      : r.writer === r.preferred ? `Home ${r.home}: its merge writer is ${r.writer}\n`
        : `Home ${r.home}: its writer moves to ${r.preferred} at its next idle moment (now ${r.writer ?? 'none'})\n`,
  }),
  command({
    name: 'cluster leave',
    doc: {
      usage: 'nas cluster leave --drain',
      about: 'owner: this host hands over every writer role before maintenance and stands for none (it still serves ' +
        'its Homes)',
    },
    route: 'clusterLeave',
    flags: ['drain'],
    request: (args) => {
      if (!args.has('drain')) throw new Usage('nas cluster leave --drain: this host hands over its writer roles and stands for none (say --drain)');
      return { params: {}, body: {} };
    },
    print: (r) => `host ${r.host} stands for no writer role now${r.released.length ? `; handed over: ${r.released.join(', ')}` : ''}` +
      `${r.held.length ? `; still held (no other host takes them): ${r.held.join(', ')}` : ''}\n`,
  }),
  command({
    name: 'cluster join',
    doc: {
      usage: 'nas cluster join',
      about: 'owner: undo `nas cluster leave`: this host stands for writer roles again',
    },
    route: 'clusterJoin',
    request: () => ({ params: {}, body: {} }),
    print: (r) => `host ${r.host} stands for writer again\n`,
  }),
];
