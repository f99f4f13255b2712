import { OwnerShare } from '../owner-share.js';
import type { Owner } from '../../util/owner.js';

/**
 * Who may change a branch, and who shares its owner's rights there: the write leases in force, as the lease pass
 * applies them. The Home's owner account owns what has no record; the principals share its rights (owner-share.ts).
 */
export class LeaseAccess {
  /** The uids of the principals of the write leases in force: with root and the Home's owner, the only ones who change the view. */
  private writers = new Set<number>();
  /** The newest write lease's principal: it owns the scratch roots. */
  private principal: Owner | null = null;
  private shared: OwnerShare;

  /** `acls`: whether the kernel checks the ACLs the view reports; without them nobody shares the owner's rights. */
  constructor(readonly owner: Owner, private readonly acls = true) {
    this.shared = new OwnerShare(owner);
  }

  /** The principals of the write leases in force, the newest first (null: no local account). True when anyone's rights changed. */
  apply(principals: (Owner | null)[]): boolean {
    this.writers = new Set(principals.flatMap((p) => (p ? [p.uid] : [])));
    const shared = new OwnerShare(this.owner, this.acls ? this.writers : []);
    const newest = principals[0] ?? null;
    const changed = shared.differs(this.shared) || newest?.uid !== this.principal?.uid || newest?.gid !== this.principal?.gid;
    this.shared = shared;
    this.principal = newest;
    return changed;
  }

  /**
   * Whether uid may change the view: root, the Home's owner, or a principal of a write lease in force. The modes
   * are not enough: what a former lease holder made stays theirs, and a principal may open a folder to everyone
   * (chmod 1777).
   */
  mayWrite(uid: number): boolean {
    return uid === 0 || uid === this.owner.uid || this.writers.has(uid);
  }

  get share(): OwnerShare {
    return this.shared;
  }

  /** Who owns the scratch roots: the newest write lease's principal, else the Home's owner. */
  get scratchOwner(): Owner {
    return this.principal ?? this.owner;
  }
}
