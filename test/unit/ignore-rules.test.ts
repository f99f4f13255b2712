import { describe, expect, it } from 'vitest';
import { IgnoreRules } from '../../src/cow/branch/ignore-rules.js';

/** Policy's built-in ignore list (editor temp files) under a branch's own .gitignore files. */
describe('ignore rules: the built-in editor list', () => {
  const rules = (files: Record<string, string>) => new IgnoreRules(async (rel) => files[rel] ?? null);

  it('ignores editor temp files in a Home with no .gitignore at all', async () => {
    const r = rules({});
    for (const path of ['outbox/4913', 'outbox/.plan.md.swp', 'outbox/.plan.md.swx', 'outbox/.plan.md.swo', 'plan.md~', 'outbox/.#plan.md', 'outbox/#plan.md#', 'a/b/.x.swn']) {
      expect(await r.ignored(path), path).toBe(true);
    }
    for (const path of ['outbox/plan.md', 'outbox/movie.swf', 'outbox/49130', 'outbox/a#b', 'outbox/#draft.md', 'outbox/x.md.swp.md']) {
      expect(await r.ignored(path), path).toBe(false);
    }
  });

  it('lets a Home rule re-include one, as git lets a .gitignore override core.excludesFile', async () => {
    const r = rules({ '.gitignore': '!keep~\n', 'outbox/.gitignore': '!\\#keep#\n' });
    expect(await r.ignored('outbox/keep~')).toBe(false);
    expect(await r.ignored('outbox/#keep#')).toBe(false);
    expect(await r.ignored('outbox/drop~')).toBe(true);
  });
});
