import { Usage, splitTarget, wholeNumber } from '../args.js';
import { command } from '../command.js';

export const help = {
  hook:
    'usage: nas hook session-start [<role>[@<branch>]] [--max-tokens 2000]\n\n' +
    "What a coding agent's session-start hook should print: the briefing (AGENTS.md, MEMORY.md, resident notes,\n" +
    'an inbox summary, within the token cap) and where the agent is. Inside nas run the Home and branch come\n' +
    'from NAS_HOME and NAS_BRANCH. Claude Code: a SessionStart hook whose command is `nas hook session-start`\n' +
    '(its output is added to the context). Codex and others: AGENTS.md is already in the working directory;\n' +
    'pass the rest as the first prompt, e.g. codex "$(nas hook session-start)".\n',
};

export const commands = [
  command({
    name: 'hook session-start',
    route: 'briefing',
    flags: ['max-tokens'],
    request: (args) => {
      const given = args.positional[2];
      const [role, branch] = given ? splitTarget(given) : [process.env.NAS_HOME, process.env.NAS_BRANCH];
      if (!role) throw new Usage('name the Home (<role>[@<branch>]), or run this inside nas run, which sets NAS_HOME');
      const maxTokens = wholeNumber(args, 'max-tokens', '--max-tokens takes a whole number');
      return { params: { role }, body: { branch, maxTokens } };
    },
    print: (r, args) => {
      const inRun = !args.positional[2] && process.env.NAS_RUN;
      const mount = process.env.NAS_MOUNT || '/agents';
      const role = r.view.split('@')[0];
      const where = inRun
        ? `You work in the Agent NAS Home "${role}" at ${mount}/${role}, on branch ${process.env.NAS_BRANCH} (run ${process.env.NAS_RUN}). ` +
          `Every file you write there is committed to that branch and proposed for review when you finish; main is read-only at ${mount}/${role}@main. ` +
          'workspace/ is scratch: fast, never committed.'
        : `Agent NAS Home "${role}" (${mount}/${r.view}).`;
      return `${r.text.trimEnd()}\n\n---\n${where}\n`;
    },
  }),
];
