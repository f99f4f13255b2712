import { constants } from 'node:fs';
import type { Attr, Owner } from './attr.js';

/**
 * Who owns what, in every view: what has no metadata record (the template's files, what git pushed) belongs to
 * the Home's owner account (nasd's `owner`, root unless set), in main, in checkpoints and in every branch, run or
 * not. A branch's write-lease principals work on those files as the owner's sharers: each is a named entry of the
 * file's POSIX access ACL with the owner's own rights, on everything the owner account owns in that branch
 * (record or not). The kernel checks the ACL itself (default_permissions with FUSE_CAP_POSIX_ACL), so nothing of
 * the mount's permission check moves into nasd, and modes read back exactly as they were set (the ACL's mask is
 * the owner's and the group's rights together, so the group keeps just its own). Shared is what the owner lets
 * everyone read (the template's 0644 and 0755, what git pushed): what it keeps from others (0600, 0640, 0750) stays
 * its own and its group's; and the kernel consults an ACL only when the mode gives the group something anyway. The
 * inbox, which views show as its owner's alone, is its sharers' too in a branch (they read untrusted input there),
 * by the same rule on each node's own mode: its group bits show the mask, as on any disk with ACLs. What a sharer cannot do is what only an owner does:
 * chmod, chown, or set explicit times on the owner's files.
 */
export class OwnerShare {
  /** uids sharing the owner's rights: root and the owner itself need no entry. */
  readonly sharers: readonly number[];

  constructor(readonly owner: Owner, sharers: Iterable<number> = []) {
    this.sharers = [...new Set(sharers)].filter((uid) => uid !== 0 && uid !== owner.uid).sort((a, b) => a - b);
  }

  /**
   * Whether a node (its own attributes, `inbox`: where it is in the inbox) carries the sharers' ACL: what the owner
   * lets everyone read, the inbox folder itself, and nothing else (a symlink has no permissions to share). In the
   * inbox, which views show as the owner's alone, the node's own mode decides as everywhere else: a 0600 file moved
   * or restored into it stays the owner's.
   */
  covers(node: Owned, inbox: InboxPlace): boolean {
    if (this.sharers.length === 0 || node.uid !== this.owner.uid || (node.mode & constants.S_IFMT) === constants.S_IFLNK) return false;
    if (inbox === 'folder') return true;
    return (node.mode & 0o004) !== 0 && (inbox === 'inside' || (node.mode & 0o070) !== 0);
  }

  /**
   * The attributes as the kernel is told them (in place): in the inbox the owner's bits alone (policy.ts
   * visibleMode), and where it is shared, the ACL's mask as its group bits, as on any disk with ACLs.
   */
  shown(attr: Attr, inbox: InboxPlace): Attr {
    if (!inbox) return attr;
    const covered = this.covers(attr, inbox);
    attr.mode &= ~0o077;
    if (covered) attr.mode |= maskOf(attr.mode) << 3;
    return attr;
  }

  /**
   * The mode to keep when the kernel asks for `asked`: what it asked, except in the inbox, where the group's and
   * others' bits are not shown (policy.ts visibleMode): a chmod computed from what is shown (`chmod u+x`) keeps the
   * node's own, unless it sets some, so it does not end the node's sharing by the way. On a shared node, whose
   * group bits the kernel computed from the mask shown, only what it adds to or takes from the mask changes them.
   */
  chmodded(own: Owned, inbox: InboxPlace, asked: number): number {
    if (!inbox) return asked;
    const kept = (shift: number) => ((asked >> shift) & 7) || ((own.mode >> shift) & 7);
    let group = kept(3);
    if (this.covers(own, inbox)) {
      const mask = maskOf(own.mode & ~0o077);
      const wanted = (asked >> 3) & 7;
      group = (((own.mode >> 3) & 7) | (wanted & ~mask)) & ~(mask & ~wanted);
    }
    return (asked & ~0o077) | (group << 3) | kept(0);
  }

  /** The POSIX access ACL of a node (the kernel's xattr form), or null: none, its mode says it all. */
  acl(own: Owned, inbox: InboxPlace): Buffer | null {
    if (!this.covers(own, inbox)) return null;
    // In the inbox the group and others have nothing (visibleMode): the sharers are named, no one else.
    const attr = inbox ? { ...own, mode: own.mode & ~0o077 } : own;
    const user = (attr.mode >> 6) & 7;
    const entries: [number, number, number][] = [
      [ACL_USER_OBJ, user, UNDEFINED_ID],
      ...this.sharers.map((uid): [number, number, number] => [ACL_USER, user, uid]),
      [ACL_GROUP_OBJ, (attr.mode >> 3) & 7, UNDEFINED_ID],
      [ACL_MASK, maskOf(attr.mode), UNDEFINED_ID],
      [ACL_OTHER, attr.mode & 7, UNDEFINED_ID],
    ];
    // struct posix_acl_xattr_header { le32 a_version; } then { le16 e_tag; le16 e_perm; le32 e_id; } each.
    const out = Buffer.alloc(4 + 8 * entries.length);
    out.writeUInt32LE(ACL_XATTR_VERSION, 0);
    entries.forEach(([tag, perm, id], i) => {
      out.writeUInt16LE(tag, 4 + 8 * i);
      out.writeUInt16LE(perm, 6 + 8 * i);
      out.writeUInt32LE(id, 8 + 8 * i);
    });
    return out;
  }

  /** Whether another share gives some node different rights (the kernel's cached ACLs and modes must go). */
  differs(other: OwnerShare): boolean {
    return other.owner.uid !== this.owner.uid || other.sharers.join() !== this.sharers.join();
  }
}

/** A node's own owner and mode (as set: in the inbox, what views show is its owner's bits alone). */
export type Owned = Pick<Attr, 'uid' | 'mode'>;

/** Where a node is in the inbox: the folder itself, something inside it, or not there (false). */
export type InboxPlace = 'folder' | 'inside' | false;

export const inboxPlace = (rel: string): InboxPlace => (rel === 'inbox' ? 'folder' : rel.startsWith('inbox/') ? 'inside' : false);

/** The extended attribute the kernel reads a node's access ACL from. */
export const ACL_ACCESS = 'system.posix_acl_access';

/** The ACL's mask: what the owner and the group may do together (the named entries get the owner's rights). */
const maskOf = (mode: number): number => ((mode >> 6) | (mode >> 3)) & 7;

const ACL_XATTR_VERSION = 2;
const ACL_USER_OBJ = 0x01;
const ACL_USER = 0x02;
const ACL_GROUP_OBJ = 0x04;
const ACL_MASK = 0x10;
const ACL_OTHER = 0x20;
const UNDEFINED_ID = 0xffffffff;
