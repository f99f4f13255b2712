import { describe, expect, it } from 'vitest';
import { constants } from 'node:fs';
import { OwnerShare } from '../../src/cow/owner-share.js';

/** The share of the owner's rights, in the form the kernel reads (posix_acl_xattr) and the modes it is told. */
const ROOT = { uid: 0, gid: 0 };
const dir = (mode: number, uid = 0) => ({ uid, mode: constants.S_IFDIR | mode });
const file = (mode: number, uid = 0) => ({ uid, mode: constants.S_IFREG | mode });

/** Decode the xattr as the kernel does: version 2, then (tag, perm, id) entries. */
function entries(buf: Buffer): string[] {
  expect(buf.readUInt32LE(0)).toBe(2);
  const out: string[] = [];
  for (let at = 4; at < buf.length; at += 8) {
    const tag = buf.readUInt16LE(at);
    const perm = buf.readUInt16LE(at + 2);
    const id = buf.readUInt32LE(at + 4);
    const name = { 1: 'user:', 2: `user:${id}`, 4: 'group:', 16: 'mask:', 32: 'other:' }[tag];
    out.push(`${name}:${perm}`);
  }
  return out;
}

describe('OwnerShare', () => {
  it('has no ACL and changes no mode without sharers, or for root and the owner themselves', () => {
    for (const share of [new OwnerShare(ROOT), new OwnerShare(ROOT, [0]), new OwnerShare({ uid: 5, gid: 5 }, [5])]) {
      expect(share.acl(dir(0o755, share.owner.uid), false)).toBeNull();
      expect(share.shown({ ...dir(0o755, share.owner.uid), size: 0 } as never, false)).toMatchObject({ mode: constants.S_IFDIR | 0o755 });
    }
  });

  it("names each sharer with the owner's rights, sorted, the mask being owner and group together; modes stay as set", () => {
    const share = new OwnerShare(ROOT, [1002, 1001, 1001]);
    expect(entries(share.acl(dir(0o755), false)!)).toEqual(['user::7', 'user:1001:7', 'user:1002:7', 'group::5', 'mask::7', 'other::5']);
    expect(entries(share.acl(file(0o644), false)!)).toEqual(['user::6', 'user:1001:6', 'user:1002:6', 'group::4', 'mask::6', 'other::4']);
    expect(share.shown(file(0o644) as never, false).mode).toBe(constants.S_IFREG | 0o644);
    expect(share.chmodded(file(0o644), false, constants.S_IFREG | 0o600)).toBe(constants.S_IFREG | 0o600);
  });

  it('leaves alone what the owner keeps from others, what it does not own, and symlinks; shares the inbox by the same rule', () => {
    const share = new OwnerShare(ROOT, [1001]);
    // The kernel consults an ACL only when the group bits are not 0: such a file is the owner's alone.
    expect(share.acl(file(0o600), false)).toBeNull();
    expect(share.acl(file(0o604), false)).toBeNull();
    expect(share.acl(dir(0o700), false)).toBeNull();
    // What the owner keeps from others stays its own and its group's.
    expect(share.acl(file(0o640), false)).toBeNull();
    expect(share.acl(dir(0o750), false)).toBeNull();
    expect(share.acl(dir(0o711), false)).toBeNull();
    // The inbox shows 0700 (its owner's alone): its sharers read it in their branch, the mask shown as its group bits.
    expect(entries(share.acl(dir(0o700), 'folder')!)).toEqual(['user::7', 'user:1001:7', 'group::0', 'mask::7', 'other::0']);
    expect(share.shown(dir(0o700) as never, 'folder').mode).toBe(constants.S_IFDIR | 0o770);
    // In it, by each node's own mode as everywhere else: what everyone may read is shared (shown as the owner's)...
    expect(entries(share.acl(file(0o644), 'inside')!)).toEqual(['user::6', 'user:1001:6', 'group::0', 'mask::6', 'other::0']);
    expect(share.shown(file(0o644) as never, 'inside').mode).toBe(constants.S_IFREG | 0o660);
    expect(share.shown(file(0o604) as never, 'inside').mode).toBe(constants.S_IFREG | 0o660);
    // ...what the owner keeps from others (a 0600 file moved or restored there) is not, and shows as it is.
    for (const mode of [0o600, 0o640, 0o700]) {
      expect(share.acl(file(mode), 'inside')).toBeNull();
      expect(share.shown(file(mode) as never, 'inside').mode).toBe(constants.S_IFREG | (mode & 0o700));
    }
    expect(share.acl(file(0o644, 1001), false)).toBeNull();
    expect(share.acl(file(0o644, 1003), false)).toBeNull();
    expect(share.acl({ uid: 0, mode: constants.S_IFLNK | 0o777 }, false)).toBeNull();
  });

  it("turns the owner's chmod of a shared inbox's shown mode into the group's own bits", () => {
    const share = new OwnerShare(ROOT, [1001]);
    const own = dir(0o700); // the inbox, shown 0770
    const kept = (asked: number) => (share.chmodded(own, 'folder', constants.S_IFDIR | asked) & 0o7777).toString(8);
    expect(kept(0o774)).toBe('704'); // chmod o+r
    expect(kept(0o700)).toBe('700');
    expect(kept(0o770)).toBe('700'); // the shown bits sent back: nothing changes
    expect(share.chmodded(dir(0o700, 1001), 'folder', 0o770)).toBe(0o770);
    // A file inside that only its owner reads: the asked mode as it is.
    expect(share.chmodded(file(0o600), 'inside', constants.S_IFREG | 0o644)).toBe(constants.S_IFREG | 0o644);
    // chmod u+x of a shared file inside (shown 0660): its own others' bits stay, and with them its sharing.
    const shared = file(0o644);
    const asked = share.chmodded(shared, 'inside', constants.S_IFREG | 0o760);
    expect(asked).toBe(constants.S_IFREG | 0o744);
    expect(share.covers({ ...shared, mode: asked }, 'inside')).toBe(true);
  });

  it('tells when another share gives different rights', () => {
    expect(new OwnerShare(ROOT, [1, 2]).differs(new OwnerShare(ROOT, [2, 1]))).toBe(false);
    expect(new OwnerShare(ROOT, [1]).differs(new OwnerShare(ROOT, [1, 2]))).toBe(true);
    expect(new OwnerShare(ROOT).differs(new OwnerShare({ uid: 7, gid: 7 }))).toBe(true);
  });
});
