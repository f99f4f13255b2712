import { describe, expect, it } from 'vitest';
import { driverFor, holds, mergeStructured, needsPerson } from '../../src/merge/structured.js';
import { DEFAULT_MERGE, parseMerge } from '../../src/config/home-config.js';

describe('structured merge', () => {
  const json = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;

  it('takes each side\'s keys, key by key, in main\'s order then the branch\'s new keys', () => {
    const r = mergeStructured('json', json({ a: 1, b: { x: 1, y: 1 }, gone: 1 }), json({ a: 2, b: { x: 1, y: 1 }, gone: 1 }), json({ a: 1, b: { x: 1, y: 2 }, c: 3 }));
    expect(r).toMatchObject({ text: json({ a: 2, b: { x: 1, y: 2 }, c: 3 }) });
  });

  it('stops where both sides changed one key differently, naming every such key', () => {
    const r = mergeStructured('json', json({ a: 1, b: { x: 1 }, l: [1] }), json({ a: 2, b: { x: 2 }, l: [1, 2] }), json({ a: 3, b: { x: 3 }, l: [1, 3] }));
    expect(r).toEqual({ conflict: ['a', 'b.x', 'l'] });
    // One side deletes a key the other changes: a conflict too; the same change on both sides is not.
    expect(mergeStructured('json', json({ a: 1 }), json({}), json({ a: 2 }))).toEqual({ conflict: ['a'] });
    expect(mergeStructured('json', json({ a: 1 }), json({ a: 2 }), json({ a: 2 }))).toMatchObject({ text: json({ a: 2 }) });
  });

  it("keeps a JSON file's own formatting: compact stays compact, spacing and indentation as written, a side's bytes where the data is that side's", () => {
    expect(mergeStructured('json', '{"a":1,"b":2}', '{"a":10,"b":2}', '{"a":1,"b":20}')).toMatchObject({ text: '{"a":10,"b":20}' });
    expect(mergeStructured('json', '{ "a": 1, "b": [1] }\n', '{ "a": 10, "b": [1] }\n', '{ "a": 1, "b": [1, 2] }\n'))
      .toMatchObject({ text: '{ "a": 10, "b": [1, 2] }\n' });
    expect(mergeStructured('json', '{\n    "a": 1,\n    "b": {"x": 1}\n}', '{\n    "a": 2,\n    "b": {"x": 1}\n}', '{\n    "a": 1,\n    "b": {"x": 2}\n}'))
      .toMatchObject({ text: '{\n    "a": 2,\n    "b": {\n        "x": 2\n    }\n}' });
    // A number a double cannot hold exactly is never rewritten: a person merges the file.
    const big = mergeStructured('json', '{"a":1,"n":12345678901234567890}', '{"a":2,"n":12345678901234567890}', '{"a":1,"n":12345678901234567891}');
    expect('conflict' in big && big.conflict[0]).toMatch(/holds the number 12345678901234567890, which the merge cannot keep exactly/);
    // The branch only reformatted; main changed a value: main's bytes, not a rewrite.
    const main = '{"a": 2,   "b": 1}\n';
    expect(mergeStructured('json', '{"a": 1, "b": 1}\n', main, '{\n  "a": 1,\n  "b": 1\n}\n')).toMatchObject({ text: main });
  });

  it('names a side that does not parse, and keeps a key called __proto__ a key', () => {
    const bad = mergeStructured('json', json({ a: 1 }), '{ "a": ', json({ a: 2 }));
    expect('conflict' in bad && bad.conflict[0]).toMatch(/^main is not valid JSON/);
    const r = mergeStructured('json', '{}', '{"__proto__": {"polluted": 1}}', '{"b": 1}');
    expect('text' in r && JSON.parse(r.text)).toEqual(JSON.parse('{"__proto__": {"polluted": 1}, "b": 1}'));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('tells whether a line-merged text holds the data the driver computed (so git\'s bytes can stay)', () => {
    expect(holds('yaml', '# kept\na: 2\nb: [1, 2]\n', { a: 2, b: [1, 2] })).toBe(true);
    expect(holds('json', '{ "a": 1, "b": 2 }', { b: 2, a: 1 })).toBe(true);
    expect(holds('json', '{ "a": 1,\n,"b": 2 }', { a: 1, b: 2 })).toBe(false);
    expect(holds('json', '{ "a": 1 }', { a: 1, b: 2 })).toBe(false);
  });

  it('merges YAML mappings the same way', () => {
    expect(mergeStructured('yaml', 'a: 1\nb: 1\n', 'a: 2\nb: 1\n', 'a: 1\nb: 2\n')).toMatchObject({ text: 'a: 2\nb: 2\n' });
  });

  it('finds the driver by the first matching glob; structured data with none needs a person', () => {
    expect(driverFor('outbox/x.json', DEFAULT_MERGE)).toBe('json');
    expect(driverFor('top.yml', DEFAULT_MERGE)).toBe('yaml');
    expect(needsPerson('outbox/c.toml', DEFAULT_MERGE)).toBe(true);
    expect(needsPerson('outbox/notes.md', DEFAULT_MERGE)).toBe(false);
    const own = parseMerge('version: 1\ndrivers:\n  - path: "**/*.toml"\n    driver: text\n  - path: "outbox/**"\n    driver: person\n').value;
    expect(needsPerson('x.toml', own)).toBe(false);
    expect(needsPerson('outbox/notes.md', own)).toBe(true);
    expect(parseMerge('version: 1\ndrivers:\n  - path: "*.csv"\n    driver: magic\n').problems[0]).toMatch(/driver must be one of json, yaml, text, person/);
  });
});
