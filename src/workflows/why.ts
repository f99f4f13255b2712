import path from 'node:path';
import { UserError } from '../util/errors.js';
import { resolvePrincipal } from '../lease/principal.js';
import { REFUSALS_KEPT, type Refusals } from '../homes/refusals.js';
import type { Credentials } from '../api/credentials.js';
import type { WhyReport } from '../api/types.js';
import type { HomeSet } from '../homes/home-set.js';
import { MountTable } from '../homes/mount-table.js';
import { isWritable } from '../cow/view.js';
import { mainRefusal } from '../cow/main-view.js';
import { BranchView } from '../cow/branch/branch-view.js';
import type { LeaseService } from './leases.js';

/**
 * `nas why <path>`: the newest refusals the mount answered for a path, with their reasons, from the ring fuse-ops
 * feeds (homes/refusals.ts). Who asks sees the refusals of the uid its credential speaks for: the owner (root's
 * token) every user's, as it reads nasd's log anyway; a run its user's; a lease holder its principal's. Another
 * user's refusals are not shown: their paths and times tell what that user is doing. A caller with neither
 * (a member of the socket's group) is shown none: Node's unix sockets do not tell nasd the peer's uid.
 */
export class WhyService {
  constructor(private readonly refusals: Refusals, private readonly homes: HomeSet, private readonly leases: LeaseService) {}

  async why(body: { path?: string; limit?: number }, creds: Credentials): Promise<WhyReport> {
    const mount = this.homes.opts.mount;
    const asked = body.path === undefined ? undefined : this.underMount(body.path, creds);
    const shown = await this.whose(asked, creds);
    const limit = Math.max(1, Math.min(Math.floor(body.limit ?? 10), REFUSALS_KEPT));
    const visible = (uid: number | undefined) => shown === 'all' || (shown !== 'none' && uid === shown.uid);
    const found = shown === 'none' ? [] : this.refusals.find({ path: asked, visible, limit });
    const full = (p: string) => path.posix.join(mount, p);
    const readOnly = asked === undefined ? undefined : await this.readOnly(asked);
    return {
      mount,
      path: asked === undefined ? undefined : full(asked),
      shown,
      ...(readOnly ? { readOnly } : {}),
      refusals: found.map((r) => ({ ...r, path: full(r.path), other: r.other === undefined ? undefined : full(r.other) })),
    };
  }

  /**
   * The path as fuse-ops names it (`/<role>[@<branch>]/<rel>`), from a path under the mount or `<role>[@<branch>]/<rel>`.
   * Inside a run, `/agents/<role>` is the run's branch: asked by the run, `<role>` stands for it.
   */
  private underMount(asked: string, creds: Credentials): string {
    const mount = this.homes.opts.mount;
    let rel: string;
    if (asked.startsWith('/')) {
      const p = path.posix.normalize(asked);
      if (p !== mount && !p.startsWith(`${mount.replace(/\/$/, '')}/`)) {
        throw new UserError(`${asked} is not under the mount (${mount}): name a path there, or <role>[@<branch>]/<path>`, 400);
      }
      rel = p.slice(mount.replace(/\/$/, '').length);
    } else {
      rel = `/${path.posix.normalize(asked)}`;
    }
    rel = rel.replace(/\/+$/, '') || '/';
    const run = creds.run;
    if (run) {
      const [first, ...more] = rel.slice(1).split('/');
      if (first === run.role) rel = ['', `${run.role}@${run.branch}`, ...more].join('/');
    }
    return rel;
  }

  /**
   * What a read-only view is, for a path in one: main's refusal as fuse-ops gives it (main, a checkpoint or
   * commit, a branch another host holds), or an expired branch's. The kernel's own check refuses a user whose
   * mode bits keep them out (Permission denied) before nasd sees the write; the line says so, as nothing is listed.
   */
  private async readOnly(asked: string): Promise<string | undefined> {
    const name = asked.slice(1).split('/')[0];
    if (!name) return undefined;
    const table = new MountTable(this.homes);
    await table.resolve(name);
    const view = table.view(name);
    const rel = asked.slice(name.length + 2);
    const where = path.posix.join(this.homes.opts.mount, name);
    const kernel = '. A write there gets "Read-only file system" (EROFS), or "Permission denied" (EACCES) from the kernel\'s own ' +
      'check where the mode bits keep the user out (nasd never sees that one, so it is not listed)';
    if (view && !isWritable(view)) return `${where}: ${mainRefusal(view, 'open-write', rel).message}${kernel}`;
    if (view instanceof BranchView && view.expired) {
      const [role, branch] = name.split('@');
      const record = this.homes.find(role)?.records.get(branch);
      return `${where}: ${name} expired${record ? ` at ${record.expires} (ttl ${record.ttl})` : ''}, read-only until it is removed ` +
        `(nas branch extend ${role}/${branch} --ttl <duration> takes writes again)${kernel}`;
    }
    return undefined;
  }

  /** Whose refusals this caller sees (see the class). */
  private async whose(asked: string | undefined, creds: Credentials): Promise<WhyReport['shown']> {
    if (creds.owner) return 'all';
    if (creds.run) return { uid: creds.run.uid };
    if (!creds.lease) return 'none';
    const named = asked?.slice(1).split('/')[0].split(/[@:]/)[0];
    const roles = named ? [named] : [...this.homes.all()].map((m) => m.home.role);
    for (const role of roles) {
      if (!this.homes.find(role)) continue;
      const lease = await this.leases.inForce(role, creds.lease);
      const owner = lease ? await resolvePrincipal(lease.principal) : null;
      if (owner) return { uid: owner.uid };
    }
    return 'none';
  }
}
