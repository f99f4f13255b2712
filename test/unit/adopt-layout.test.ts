import { describe, expect, it } from 'vitest';
import { readmeParagraph, repositoryName } from '../../src/home/adopt-layout.js';

/** How an adopted repository's AGENTS.md names it: from its path or URL, and its README's first paragraph. */
describe('adopt layout', () => {
  it('names a repository by the last part of its path or URL, without .git', () => {
    expect(repositoryName('/srv/git/widget.git')).toBe('widget');
    expect(repositoryName('/home/dev/project/')).toBe('project');
    expect(repositoryName('https://git.example/org/tools.git')).toBe('tools');
    expect(repositoryName('ssh://git@host:22/org/app')).toBe('app');
    expect(repositoryName('file:///tmp/x/lib.git/')).toBe('lib');
  });

  it('takes the first paragraph of prose, after titles, badges, images and HTML', () => {
    expect(readmeParagraph('a project\n')).toBe('a project');
    expect(readmeParagraph('# Widget\n\n[![ci](https://x/b.svg)](https://x)\n<p align="center"><img src="l.png"></p>\n\nTurns gears\ninto widgets.\n\nMore.\n'))
      .toBe('Turns gears into widgets.');
    // reStructuredText and setext titles, with their rules.
    expect(readmeParagraph('=====\nTools\n=====\n\n.. image:: logo.png\n\nSmall tools.\n')).toBe('Small tools.');
    expect(readmeParagraph('Widget\n======\n\nIt works.\nSecond line\n---\n')).toBe('It works.');
    expect(readmeParagraph('# Only a title\n')).toBeNull();
    expect(readmeParagraph('')).toBeNull();
  });

  it('cuts a long paragraph at a word, within AGENTS.md\'s budget', () => {
    const long = readmeParagraph(`${'word '.repeat(400)}\n`)!;
    expect(long.length).toBeLessThanOrEqual(602);
    expect(long.endsWith('word …')).toBe(true);
  });
});
