import { MODE, type Change, type Store } from '../store/store.js';
import { octal } from './shown-diff.js';

/**
 * Modes that give more than a change of content does: a setuid or setgid file runs with its owner's or group's
 * rights, anyone may change a world-writable one. A PR that brings one waits for the owner (merge-policy.ts).
 */

const RISKY: [number, string][] = [[0o4000, 'setuid'], [0o2000, 'setgid'], [0o002, 'world-writable']];
const S_IFMT = 0o170000;

/**
 * Why a changed path's full mode needs a person, or null: it became setuid, setgid or world-writable, or the
 * content of a setuid or setgid file changed (what runs with another's rights is new).
 */
export function modeRisk(path: string, before: number | undefined, after: number | undefined, contentChanged: boolean): string | null {
  if (after === undefined || (after & S_IFMT) === MODE.link) return null;
  let bits = after & ~(before ?? 0) & 0o6002;
  if (contentChanged && (after & S_IFMT) !== MODE.tree) bits |= after & 0o6000;
  if (bits === 0) return null;
  const what = RISKY.filter(([bit]) => bits & bit).map(([, name]) => name).join(', ');
  const name = (after & S_IFMT) === MODE.tree ? `${path}/` : path;
  const how = before === undefined ? `is new with mode ${octal(after)}` : before === after ? `changed, with mode ${octal(after)}` : `${octal(before)} -> ${octal(after)}`;
  return `${name} ${how} (${what})`;
}

/** The risky modes a branch brings, between its fork point's tree and its head's: files and folders. */
export async function modeRisks(store: Store, base: string, head: string, changes: Change[], folders: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const c of changes) {
    if (!c.after) continue;
    const before = c.before && (await store.fullModeAt(base, c.path, c.before));
    const risk = modeRisk(c.path, before, await store.fullModeAt(head, c.path, c.after), c.before?.oid !== c.after.oid);
    if (risk) out.push(risk);
  }
  for (const dir of folders) {
    const [was, now] = await Promise.all([store.lookupPath(base, dir), store.lookupPath(head, dir)]);
    if (now?.mode !== MODE.tree) continue;
    const before = was?.mode === MODE.tree ? await store.fullModeAt(base, dir, was) : undefined;
    const risk = modeRisk(dir, before, await store.fullModeAt(head, dir, now), false);
    if (risk) out.push(risk);
  }
  return out;
}
