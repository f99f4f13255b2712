/**
 * Path patterns for policy and retention rules, matched against Home-relative paths:
 * `**` matches any number of components, `*` anything within one component, `?` one character.
 * A pattern ending in `/` (or `/**`) matches the directory itself and everything below it.
 */
export function globToRegExp(pattern: string): RegExp {
  let p = pattern.trim().replace(/^\/+/, '');
  if (p.endsWith('/')) p += '**';
  let re = '';
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === '*' && p[i + 1] === '*') {
      const atEnd = i + 2 >= p.length;
      if (p[i + 2] === '/') i++;
      i++;
      re += atEnd ? '.*' : '(?:.*/)?';
      continue;
    }
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  // "dir/**" also matches "dir" itself.
  re = re.replace(/\/\.\*$/, '(?:/.*)?');
  return new RegExp(`^${re}$`);
}

export function matchesAny(path: string, patterns: RegExp[]): boolean {
  for (const re of patterns) if (re.test(path)) return true;
  return false;
}
