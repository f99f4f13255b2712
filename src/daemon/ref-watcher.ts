import path from 'node:path';
import { watch, type FSWatcher } from 'chokidar';
import type { Logger } from 'pino';

/**
 * Watches every Home's main ref in the state directory (`homes/<role>.git/refs/heads/main`, and
 * `packed-refs`, where `git gc` moves refs), so a merge or an operator's push shows in the main view at
 * once, and nothing runs while nothing changes. Everything else below `homes/` (objects, upper
 * directories) is never walked.
 */
export function watchMainRefs(stateDir: string, onChange: () => void, log: Logger): FSWatcher {
  const homes = path.join(stateDir, 'homes');
  const wanted = (p: string): boolean => {
    const rel = path.relative(homes, p);
    if (rel === '') return true;
    const parts = rel.split(path.sep);
    if (!parts[0].endsWith('.git')) return false;
    const inside = parts.slice(1).join('/');
    return ['', 'refs', 'refs/heads', 'refs/heads/main', 'packed-refs'].includes(inside);
  };
  let timer: NodeJS.Timeout | null = null;
  const changed = () => {
    // A ref update is a lock file, a write and a rename: one refresh after the burst.
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      onChange();
    }, 10);
  };
  const watcher = watch(homes, { ignored: (p) => !wanted(p), ignoreInitial: true, depth: 3 });
  watcher.on('all', changed);
  watcher.on('error', (err) => log.error({ err }, 'watching the main refs failed; main follows on the periodic tick'));
  return watcher;
}
