import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

/**
 * The binding's C++ on its own (native/test/): the node table (bind, hard links, FORGET, private ids, move, the
 * hand-over's export and import) and the cache's freshness rules, built and run as the addon is built and again
 * with AddressSanitizer and UndefinedBehaviorSanitizer. run.sh fails on a failed check or any sanitizer report.
 */
const SCRIPT = path.resolve(import.meta.dirname, '../../native/test/run.sh');

describe('the native node table and cache', () => {
  it('pass their C++ unit tests, plain and under ASan+UBSan', () => {
    const r = spawnSync('bash', [SCRIPT], { encoding: 'utf8' });
    const output = `${r.stdout}${r.stderr}`;
    expect(output).not.toMatch(/FAILED|runtime error|Sanitizer/);
    expect(output.match(/ 0 failed checks/g)).toHaveLength(2);
    expect(output).toContain('native tests: passed (plain and sanitized)');
    expect(r.status).toBe(0);
  }, 600_000);
});
