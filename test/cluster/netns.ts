/**
 * Network namespaces for the cluster's partition scenarios (partitions.test.ts): a "switch" namespace holding a
 * bridge, and one namespace per place (the git server, each host), each joined to the bridge by a veth pair and
 * given an address in a private /24 that exists only inside these namespaces. The switch has .1 on the bridge:
 * the test's vantage point (etcdctl runs there). Loopback is up everywhere.
 *
 * A partition is an nft table (`inet nas_cut`) added in a place's namespace; healing deletes it:
 * - 'all': nothing in or out of its veth (the place is cut off entirely; loopback still works);
 * - 'etcd': no etcd client traffic (port 2379) from the place, to any member, its own included; its etcd member
 *   still serves the others and keeps its peers (the host cut off from etcd, not etcd from itself);
 * - 'peers': no etcd peer traffic (port 2380) in or out (the place's etcd member isolated from the others; its
 *   clients still reach it).
 *
 * Names carry the test process's pid (`nas<pid>-<rand>-<place>`): namespaces left by a run that died without its
 * afterAll are removed by the next run (their pid is gone); no other namespace is touched.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { run } from '../helpers.js';

export type Cut = 'all' | 'etcd' | 'peers';

export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;

async function sh(cmd: string, args: string[], input?: string): Promise<string> {
  const r = await run(cmd, args, input === undefined ? {} : { input });
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr.trim() || r.stdout.trim()} (exit ${r.code})`);
  return r.stdout;
}

const RULES: Record<Cut, { in: string; out: string }> = {
  all: { in: 'iifname "eth0" drop', out: 'oifname "eth0" drop' },
  etcd: { in: `tcp sport ${ETCD_CLIENT_PORT} drop`, out: `tcp dport ${ETCD_CLIENT_PORT} drop` },
  peers: { in: `tcp dport ${ETCD_PEER_PORT} drop; tcp sport ${ETCD_PEER_PORT} drop`, out: `tcp dport ${ETCD_PEER_PORT} drop; tcp sport ${ETCD_PEER_PORT} drop` },
};

/** Namespaces of earlier runs whose test process is gone. */
async function sweepStale(): Promise<void> {
  const r = await run('ip', ['netns', 'list']);
  for (const line of r.stdout.split('\n')) {
    const name = line.split(' ')[0] ?? '';
    const m = /^nas(\d+)-[0-9a-f]+-[a-z0-9]+$/.exec(name);
    if (!m || Number(m[1]) === process.pid) continue;
    try {
      process.kill(Number(m[1]), 0);
    } catch {
      await run('ip', ['netns', 'del', name]);
    }
  }
}

export class Net {
  private readonly cuts = new Map<string, Cut>();
  private made: string[] = [];

  private constructor(readonly id: string, readonly subnet: string, readonly places: string[]) {}

  /** The switch and a namespace per place, connected; throws (having removed what it made) if any step fails. */
  static async create(places: string[]): Promise<Net> {
    await sweepStale();
    const net = new Net(`nas${process.pid}-${randomBytes(3).toString('hex')}`, `10.231.${randomInt(1, 255)}`, places);
    try {
      const sw = net.ns('switch');
      await sh('ip', ['netns', 'add', sw]);
      net.made.push(sw);
      await sh('ip', ['-n', sw, 'link', 'add', 'br0', 'type', 'bridge']);
      await sh('ip', ['-n', sw, 'link', 'set', 'lo', 'up']);
      await sh('ip', ['-n', sw, 'link', 'set', 'br0', 'up']);
      await sh('ip', ['-n', sw, 'addr', 'add', `${net.subnet}.1/24`, 'dev', 'br0']);
      for (const [i, place] of places.entries()) {
        const ns = net.ns(place);
        await sh('ip', ['netns', 'add', ns]);
        net.made.push(ns);
        await sh('ip', ['-n', sw, 'link', 'add', `v${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
        await sh('ip', ['-n', sw, 'link', 'set', `v${i}`, 'master', 'br0', 'up']);
        await sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
        await sh('ip', ['-n', ns, 'addr', 'add', `${net.ip(place)}/24`, 'dev', 'eth0']);
        await sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      }
    } catch (err) {
      await net.destroy();
      throw err;
    }
    return net;
  }

  ns(place: string): string {
    return `${this.id}-${place === 'switch' ? 'sw' : place}`;
  }

  /** The place's address: the switch .1, the places .10 on in order. */
  ip(place: string): string {
    if (place === 'switch') return `${this.subnet}.1`;
    const i = this.places.indexOf(place);
    if (i < 0) throw new Error(`no place ${place} in this net`);
    return `${this.subnet}.${10 + i}`;
  }

  /** The command prefix that runs a program in the place's namespaces (network, and a mount namespace of its own). */
  exec(place: string): string[] {
    return ['ip', 'netns', 'exec', this.ns(place)];
  }

  /** Partition the place as `how` says (one partition at a time per place). */
  async cut(place: string, how: Cut): Promise<void> {
    if (this.cuts.has(place)) throw new Error(`${place} is cut already (${this.cuts.get(place)})`);
    const rules = RULES[how];
    const table = 'table inet nas_cut {\n' +
      `  chain inbound { type filter hook input priority -10; policy accept; ${rules.in}; }\n` +
      `  chain outbound { type filter hook output priority -10; policy accept; ${rules.out}; }\n}\n`;
    await sh('ip', ['netns', 'exec', this.ns(place), 'nft', '-f', '-'], table);
    this.cuts.set(place, how);
  }

  async heal(place: string): Promise<void> {
    if (!this.cuts.has(place)) return;
    await sh('ip', ['netns', 'exec', this.ns(place), 'nft', 'delete', 'table', 'inet', 'nas_cut']);
    this.cuts.delete(place);
  }

  /** Every cut healed and every namespace removed (the veths and the bridge go with them); never throws. */
  async destroy(): Promise<void> {
    for (const place of [...this.cuts.keys()]) await this.heal(place).catch(() => undefined);
    for (const ns of this.made.reverse()) await run('ip', ['netns', 'del', ns]);
    this.made = [];
  }
}
