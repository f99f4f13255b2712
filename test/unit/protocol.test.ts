import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { ATTR_WORDS, FIELD_NAMES, OP, OPS, SET, SETATTR_WORDS, STATFS_WORDS, packAttr, type Op } from '../../src/fuse-ops/protocol.js';

/** The binding's side of the protocol, read from its source: what C++ compiles is what is compared. */
const HEADER = fs.readFileSync(path.resolve(import.meta.dirname, '../../native/protocol.h'), 'utf8');

interface Row { name: string; code: number; label: string; fields: string[]; answer: string }

/** The field bits in declaration order (F_FH = 1u << 0 ...), and their JS names (FIELD_NAMES). */
const fieldBits = [...HEADER.matchAll(/^\s*(F_[A-Z]+) = 1u << (\d+),/gm)].map((m) => ({ name: m[1], bit: Number(m[2]) }));
const jsNames = [...(HEADER.match(/FIELD_NAMES\[\] = \{([^}]*)\}/)?.[1] ?? '').matchAll(/"(\w+)"/g)].map((m) => m[1]);

function rows(): Row[] {
  return [...HEADER.matchAll(/^\s*X\((\w+),\s*(\d+),\s*"(\w+)",\s*\w+,\s*\w+,\s*\w+,\s*([^,]+),\s*A_(\w+)\)/gm)].map((m) => ({
    name: m[1],
    code: Number(m[2]),
    label: m[3],
    // As the binding sends them: in bit order, whatever order the row names them in.
    fields: m[4].trim() === '0' ? [] : m[4].split('|').map((f) => fieldBits.find((b) => b.name === f.trim())!.bit).sort((a, b) => a - b).map((bit) => jsNames[bit]),
    answer: m[5].toLowerCase(),
  }));
}

const words = (name: string) => Number(HEADER.match(new RegExp(`constexpr size_t ${name} = (\\d+);`))?.[1]);

describe('the protocol between the binding and JS (native/protocol.h and src/fuse-ops/protocol.ts)', () => {
  it('reads a row for every op from the header (the parser itself is not blind)', () => {
    expect(rows().length).toBe(22);
    expect(fieldBits.map((b) => b.bit)).toEqual(fieldBits.map((_, i) => i));
  });

  it('has the same op codes and names on both sides', () => {
    const native = Object.fromEntries(rows().map((r) => [r.name, r.code]));
    expect(native).toEqual(OP);
    for (const r of rows()) expect(OPS[r.code as Op].name).toBe(r.label);
  });

  it('carries the same fields per op, in the same order, under the same JS names', () => {
    expect(jsNames).toEqual([...FIELD_NAMES]);
    for (const r of rows()) expect([r.name, ...OPS[r.code as Op].fields]).toEqual([r.name, ...r.fields]);
  });

  it('answers each op with the same kind on both sides', () => {
    for (const r of rows()) expect([r.name, OPS[r.code as Op].answer]).toEqual([r.name, r.answer]);
  });

  it('lays out attributes, setattr values and statfs in the same number of words', () => {
    expect(words('ATTR_WORDS')).toBe(ATTR_WORDS);
    expect(words('SETATTR_WORDS')).toBe(SETATTR_WORDS);
    expect(words('STATFS_WORDS')).toBe(STATFS_WORDS);
    const now = new Date(1_700_000_000_123);
    const packed = packAttr({ ino: 7, mode: 0o100644, nlink: 1, uid: 2, gid: 3, size: 10, blocks: 8, blksize: 4096, atime: now, mtime: now, ctime: now });
    expect(packed.length).toBe(ATTR_WORDS);
    expect([...packed.subarray(0, 8)]).toEqual([7, 0o100644, 1, 2, 3, 0, 10, 8]);
    expect([...packed.subarray(8, 10)]).toEqual([1_700_000_000, 123_000_000]);
  });

  it("has setattr's bits as libfuse's header defines them", () => {
    const lowlevel = fs.readFileSync('/usr/include/fuse3/fuse_lowlevel.h', 'utf8');
    const bit = (name: string) => Number(lowlevel.match(new RegExp(`#define FUSE_SET_ATTR_${name}\\s+\\(1 << (\\d+)\\)`))?.[1]);
    for (const [name, value] of Object.entries(SET)) expect([name, 1 << bit(name)]).toEqual([name, value]);
  });
});
