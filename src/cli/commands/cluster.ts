import { command } from '../command.js';
import { short, table } from '../format.js';

export const help = {
  cluster:
    'usage: nas cluster status [--json]\n\n' +
    'Several hosts serving the same Homes (nasd.yaml cluster:, see docs/operators.md): etcd\'s health, the hosts\n' +
    'alive with their version and Homes, and per Home its merge writer and epoch, main as this host has it, when\n' +
    'main was last published, the proposals queued, and whether this host\'s main is the published one.\n',
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
];
