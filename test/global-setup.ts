import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/** Before and after the suite: unmount anything a crashed earlier run left under the test prefix. */
function sweep(): void {
  const mounts = fs.readFileSync('/proc/mounts', 'utf8').split('\n').map((l) => l.split(' ')[1]).filter((m) => m?.includes('/nas-test-'));
  for (const m of mounts) {
    try {
      execFileSync('fusermount', ['-uz', m]);
    } catch {
      // already gone
    }
  }
}

export function setup(): void {
  if (!fs.existsSync('dist/src/daemon/main.js')) throw new Error('dist/ is missing: run scripts/test.sh (it builds first)');
  sweep();
}

export function teardown(): void {
  sweep();
}
