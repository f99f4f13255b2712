import { Usage, splitTarget, wholeNumber } from '../args.js';
import { command } from '../command.js';
import { displayPath } from '../../util/display.js';
import type { ContextReport } from '../../api/types.js';
import type { SharedContext } from '../../memory/shared.js';

export const help = {
  context:
    'usage: nas context [<role>[@<branch>]]\n\nPrints the files to read at session start, then the files to read only when a task needs them\n' +
    '(paths under the mount, not contents), ready for a session-start hook to print as is. Inside nas run the Home\n' +
    'and branch come from NAS_HOME and NAS_BRANCH, and the paths are where the run sees its branch. Homes named under\n' +
    'shared: in .nas/role.yaml add their memory index (read from their main) to the files to read on demand.\n',
  briefing:
    'usage: nas briefing <role>[@<branch>] [--max-tokens 2000]\n\nAGENTS.md, MEMORY.md, memory/resident.md and an inbox summary within a token cap (o200k_base).\n' +
    'Whole sections that do not fit are left out and listed at the end; nothing is cut mid-sentence.\n',
};

/**
 * The start set, then what to read on demand: paths under the mount (`nas context`, `nas hook session-start`).
 * Shared scopes come last, each path labelled with its Home and a topic with its description (their index is not
 * resident, so the line itself says when to read it).
 */
export const contextText = (r: ContextReport): string =>
  'READ-ON-START (read these now, in this order):\n' + r.start.map((p) => `${displayPath(`${r.root}/${p}`)}\n`).join('') +
  `\nREAD-ON-DEMAND (read one only when the task needs it${r.indexed ? "; memory/MEMORY.md's index says when" : ''}):\n` +
  r.demand.map((d) => `${displayPath(`${r.root}/${d.path}`)}${d.label ? `  [${d.label}]` : ''}\n`).join('') +
  (r.shared ?? []).map(sharedText).join('');

const sharedText = (s: SharedContext): string => {
  const label = `[shared: ${s.home}]`;
  if (s.problem || !s.root) return `(shared memory of ${s.home} left out: ${s.problem ?? 'not readable'})\n`;
  const at = (p: string) => displayPath(`${s.root}/${p}`);
  return (s.index ? `${at(s.index)}  ${label}\n` : '') +
    (s.topics ?? []).map((t) => `${at(t.path)}  ${label}${t.description ? ` ${t.description.replace(/\s+/g, ' ')}` : ''}\n`).join('');
};

/** The Home and branch named, or inside `nas run` (nothing named) the run's own. */
export function contextTarget(given: string | undefined): { role: string; branch?: string; inRun: boolean } {
  if (given) {
    const [role, branch] = splitTarget(given);
    return { role, branch, inRun: false };
  }
  const role = process.env.NAS_HOME;
  if (!role) throw new Usage('name the Home (<role>[@<branch>]), or run this inside nas run, which sets NAS_HOME');
  return { role, branch: process.env.NAS_BRANCH || undefined, inRun: !!process.env.NAS_RUN };
}

/** Where the paths are read: inside a run the branch is at the Home's ordinary path, so that is where the agent reads. */
export const contextRoot = (r: ContextReport, inRun: boolean): string =>
  inRun ? `${process.env.NAS_MOUNT || '/agents'}/${r.view.split('@')[0]}` : r.root;

export const commands = [
  command({
    name: 'context',
    doc: {
      usage: 'nas context [<role>[@<branch>]]',
      about: 'READ-ON-START then READ-ON-DEMAND paths under the mount, for a session-start hook (inside nas run: the run\'s)',
    },
    route: 'context',
    request: (args) => {
      const { role, branch } = contextTarget(args.positional[1]);
      return { params: { role }, body: { branch } };
    },
    print: (r, args) => contextText({ ...r, root: contextRoot(r, contextTarget(args.positional[1]).inRun) }),
  }),
  command({
    name: 'briefing',
    doc: {
      usage: 'nas briefing <role>[@<branch>] [--max-tokens 2000]',
      about: 'the boot view (AGENTS.md, MEMORY.md, inbox summary) within a token cap',
    },
    route: 'briefing',
    flags: ['max-tokens'],
    request: (args) => {
      const [role, branch] = splitTarget(args.need(1, '<role>[@<branch>]'));
      const maxTokens = wholeNumber(args, 'max-tokens', '--max-tokens takes a whole number');
      return { params: { role }, body: { branch, maxTokens } };
    },
    print: (r) => r.text,
  }),
];
