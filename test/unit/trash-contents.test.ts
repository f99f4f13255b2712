import { describe, expect, it } from 'vitest';
import { contentsOf, type TrashRecord } from '../../src/trash/trash.js';

const rec = (id: string, path: string, deletedAt: string, extra: Partial<TrashRecord> = {}): TrashRecord =>
  ({ id, path, branch: 'b', kind: 'file', size: 0, deletedAt: `2024-01-01T00:00:${deletedAt}Z`, ...extra });

/** What was deleted with a folder in one operation (the pass that emptied it), as the recycle area recognises it. */
describe('contentsOf', () => {
  const folder = rec('f', 'rs', '10.000', { kind: 'dir', since: '2024-01-01T00:00:05.000Z' });
  // Newest first, as Trash.list returns them.
  const all = [
    rec('late', 'rs/a', '11.000'), // deleted after the folder (made again, deleted again): not part of it
    folder,
    rec('a2', 'rs/a', '09.000'),
    rec('sub', 'rs/sub', '08.000', { kind: 'dir' }),
    rec('c', 'rs/sub/c', '07.000'),
    rec('other', 'rs/x', '07.500', { branch: 'other' }),
    rec('sibling', 'rsx/y', '07.600'),
    rec('a1', 'rs/a', '06.000'), // an older deletion of the same path in the pass: the newest wins
    rec('old', 'rs/old', '01.000'), // before the pass began
  ];

  it('takes the newest record per path below the folder, of its branch, within the pass', () => {
    expect(contentsOf(folder, all).map((r) => r.id)).toEqual(['a2', 'sub', 'c']);
  });

  it('without a pass, what was deleted at the same instant; a file has no contents', () => {
    const bare = { ...folder, since: undefined };
    expect(contentsOf(bare, [...all, rec('same', 'rs/z', '10.000')]).map((r) => r.id)).toEqual(['same']);
    expect(contentsOf(rec('x', 'rs', '10.000'), all)).toEqual([]);
  });
});
