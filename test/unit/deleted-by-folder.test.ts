import { describe, expect, it } from 'vitest';
import { byFolder } from '../../src/merge/propose.js';

/** How a PR's reasons name what it deletes: a folder removed whole once, with its count. */
describe('deleted files by folder', () => {
  it('stands a removed folder (its topmost) for the files below it, where its first file stood; a lone file stays itself', () => {
    const paths = ['a.md', 'bulk/deep/x.md', 'bulk/y.md', 'kept/z.md', 'bulk/deep/w.md', 'one/f.md'];
    expect(byFolder(paths, ['bulk', 'bulk/deep', 'one'])).toEqual(['a.md', 'bulk/ (3 files)', 'kept/z.md', 'one/f.md']);
  });

  it('leaves paths alone when no folder went, and a folder whose name another starts with apart', () => {
    expect(byFolder(['x.md', 'y.md'], [])).toEqual(['x.md', 'y.md']);
    expect(byFolder(['bulk2/a.md', 'bulk/b.md', 'bulk/c.md'], ['bulk'])).toEqual(['bulk2/a.md', 'bulk/ (2 files)']);
  });
});
