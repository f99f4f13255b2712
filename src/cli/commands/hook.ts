import { wholeNumber } from '../args.js';
import { command } from '../command.js';
import { contextRoot, contextTarget, contextText } from './context.js';

export const help = {
  hook:
    'usage: nas hook session-start [<role>[@<branch>]]\n\n' +
    "What a coding agent's session-start hook should print: the READ-ON-START paths (AGENTS.md, MEMORY.md, resident\n" +
    'notes: read them now, in order), then the READ-ON-DEMAND paths (notes, skills, journal, inbox: read one only when\n' +
    'the task needs it), paths under the mount and not contents, and where the agent is. Inside nas run the Home and\n' +
    'branch come from NAS_HOME and NAS_BRANCH, and the paths are where the run sees its branch. Claude Code: a\n' +
    'SessionStart hook whose command is `nas hook session-start` (its output is added to the context). Codex and\n' +
    'others: pass it as the first prompt, e.g. codex "$(nas hook session-start)". For contents within a token cap,\n' +
    'see nas briefing (--max-tokens is still accepted here and ignored: the hook prints paths).\n',
};

export const commands = [
  command({
    name: 'hook session-start',
    doc: {
      usage: 'nas hook session-start [<role>[@<branch>]] [--max-tokens N]',
      about: 'what an agent\'s session-start hook prints: READ-ON-START and READ-ON-DEMAND paths, and where the agent ' +
        'works',
    },
    route: 'context',
    flags: ['max-tokens'],
    request: (args) => {
      const { role, branch } = contextTarget(args.positional[2]);
      // Hook configurations written for the briefing pass it; a bad value is still a usage error.
      wholeNumber(args, 'max-tokens', '--max-tokens takes a whole number');
      return { params: { role }, body: { branch } };
    },
    print: (r, args) => {
      const { inRun } = contextTarget(args.positional[2]);
      const mount = process.env.NAS_MOUNT || '/agents';
      const role = r.view.split('@')[0];
      const root = contextRoot(r, inRun);
      const where = inRun
        ? `You work in the Agent NAS Home "${role}" at ${mount}/${role}, on branch ${process.env.NAS_BRANCH} (run ${process.env.NAS_RUN}). ` +
          `Every file you write there is committed to that branch and proposed for review when you finish; main is read-only at ${mount}/${role}@main. ` +
          'workspace/ is scratch: fast, never committed.'
        : `Agent NAS Home "${role}" (${r.root}).`;
      return `${contextText({ ...r, root })}\n---\n${where}\n`;
    },
  }),
];
