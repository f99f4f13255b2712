import path from 'node:path';

/**
 * Markdown links into the Home from a file: inline `[text](target "title")`, `[text](<target>)` and
 * reference definitions `[id]: target`, resolved against the file's directory. An absolute path through a
 * mount (`/agents/<role>/memory/...`) counts from the Home directory it names.
 */

const TITLE = `(?:\\s+(?:"[^"]*"|'[^']*'|\\([^)]*\\)))?`;
const INLINE = new RegExp(`\\]\\(\\s*(?:<([^>]+)>|([^)\\s]+))${TITLE}\\s*\\)`, 'g');
const REFERENCE = new RegExp(`^\\s{0,3}\\[[^\\]]+\\]:\\s*(?:<([^>]+)>|(\\S+))${TITLE}\\s*$`, 'g');
const HOME_ROOTS = /\/((?:memory|inbox|outbox|skills|workspace)\/.*|AGENTS\.md)$/;

export interface Link {
  line: number;
  /** As written. */
  target: string;
  /** Relative to the Home's root, normalised; starts with `../` when it points outside the Home. */
  path: string;
}

export function relativeLinks(file: string, text: string): Link[] {
  const out: Link[] = [];
  let fenced = false;
  text.split('\n').forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) return;
    for (const m of [...line.matchAll(INLINE), ...line.matchAll(REFERENCE)]) {
      const target = m[1] ?? m[2];
      // URLs (scheme:) and anchors within the file are not links into the Home.
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
      let decoded: string;
      try {
        decoded = decodeURIComponent(target.split('#')[0]);
      } catch {
        decoded = target.split('#')[0];
      }
      if (decoded === '') continue;
      let resolved: string;
      if (decoded.startsWith('/')) {
        const inHome = HOME_ROOTS.exec(path.posix.normalize(decoded));
        if (!inHome) continue;
        resolved = inHome[1];
      } else resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), decoded));
      out.push({ line: i + 1, target, path: resolved.replace(/\/$/, '') });
    }
  });
  return out;
}
