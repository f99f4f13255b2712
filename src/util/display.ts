/** A path as printed for a person or an agent: quoted when it holds control characters, so a name cannot forge lines. */
export const displayPath = (p: string): string => (/[\x00-\x1f\x7f]/.test(p) ? JSON.stringify(p) : p);

/**
 * Text as printed to a terminal: control characters other than newline and tab (and CR before LF) shown
 * as \xNN, so content a run wrote (an intent, a diff, a file name) cannot move the cursor or hide lines.
 */
export const printable = (s: string): string =>
  s.replace(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

/** A change of one piece of a file's metadata as a line: `owner root -> alice` (no value: the side has no metadata record). */
export const metaText = (m: { field: string; before?: string; after?: string }): string =>
  `${m.field} ${m.before ?? 'unrecorded'} -> ${m.after ?? 'unrecorded'}`;
