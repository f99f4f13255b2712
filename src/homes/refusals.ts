/**
 * The last refusals the mount answered (EROFS, EPERM, EACCES, EDQUOT...), with their reasons, so a person whose
 * editor said only "E212" can ask `nas why <path>`. Fed by fuse-ops where it answers a refusal; kept in memory
 * only, a fixed number of them (the oldest goes first): no disk, no log parsing, nothing kept across restarts.
 */

export interface RefusalRecord {
  /** The path under the mount root as the kernel named it: `/<role>[@<branch>]/<rel>`. */
  path: string;
  /** A rename's or link's other name, when there is one. */
  other?: string;
  op: string;
  /** The errno's name: EROFS, EPERM, EACCES, EDQUOT... */
  code: string;
  /** What the rule is and what to do instead. */
  why: string;
  /** Who was refused (absent: the kernel did not say). */
  uid?: number;
  pid?: number;
  at: string;
}

export const REFUSALS_KEPT = 512;

export class Refusals {
  private readonly ring: RefusalRecord[] = [];
  private next = 0;

  constructor(private readonly size = REFUSALS_KEPT, private readonly now = () => new Date()) {}

  note(r: Omit<RefusalRecord, 'at'>): void {
    const record = { ...r, at: this.now().toISOString() };
    if (this.ring.length < this.size) this.ring.push(record);
    else this.ring[this.next] = record;
    this.next = (this.next + 1) % this.size;
  }

  /**
   * The newest refusals first, at most `limit`: of `path` or anything under it (either end of a rename), when
   * a path is given; of the uids `visible` admits.
   */
  find(o: { path?: string; visible: (uid: number | undefined) => boolean; limit: number }): RefusalRecord[] {
    const under = (p: string | undefined) => p !== undefined && (o.path === undefined || o.path === '/' || p === o.path || p.startsWith(`${o.path}/`));
    const found: RefusalRecord[] = [];
    for (let i = 1; i <= this.ring.length && found.length < o.limit; i++) {
      const r = this.ring[(this.next - i + this.ring.length) % this.ring.length];
      if ((under(r.path) || under(r.other)) && o.visible(r.uid)) found.push(r);
    }
    return found;
  }
}
