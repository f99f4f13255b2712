import { UserError } from './errors.js';

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };

/**
 * Parse "90s", "30m", "48h", "7d", "2w" into seconds. Zero is refused unless `allowZero` (an age, as in
 * `trash purge --older-than 0d`: everything); a TTL or a timeout of zero means nothing useful.
 */
export function parseDuration(text: string, opts: { allowZero?: boolean } = {}): number {
  const m = /^(\d{1,6})([smhdw])$/.exec(String(text).trim());
  if (!m) throw new UserError(`invalid duration ${JSON.stringify(text)}: use a number and a unit, e.g. 90s, 30m, 48h, 7d, 2w`);
  const seconds = Number(m[1]) * UNITS[m[2]];
  if (seconds <= 0 && !opts.allowZero) throw new UserError(`duration ${JSON.stringify(text)} must be positive`);
  return seconds;
}
