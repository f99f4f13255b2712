import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ROOT, TestDaemon, run } from '../helpers.js';
import { fences, pages, printedPattern, steps } from './pages.js';

/**
 * docs/getting-started.md, run: every `console` block after the install step, command by command, in a shell
 * against a fresh nasd serving the demo Home (a real FUSE mount, stopped by its pid and unmounted afterwards, also
 * when a step fails). /agents and /var/lib/agent-nas in a command are this daemon's mount and state directory,
 * and the other way round in what it prints; each command must print what the page shows under it (`...` any text
 * within a line) and exit 0, or non-zero where the page shows the shell's own error. `ls` prints columns, as on a
 * terminal. Nothing is timed.
 */
const PAGE = 'docs/getting-started.md';

const blocks = fences((await pages()).get(PAGE)!);

describe(`${PAGE}, run against a fresh nasd`, () => {
  let d: TestDaemon;
  let env: NodeJS.ProcessEnv;
  let webPort = '';

  beforeAll(async () => {
    d = await TestDaemon.start({ extraArgs: ['--demo'] });
    // The run's user (nobody) reaches the mount below the test's directory.
    await fs.chmod(d.dir, 0o755);
    const bin = path.join(d.dir, 'bin');
    await fs.mkdir(bin);
    await fs.writeFile(path.join(bin, 'nas'), `#!/bin/sh\nexec ${process.execPath} ${ROOT}/dist/src/cli/main.js "$@"\n`, { mode: 0o755 });
    env = {
      PATH: `${bin}:${process.env.PATH}`, NAS_SOCKET: d.socket, NAS_OWNER_TOKEN_FILE: `${d.state}/owner.token`,
      NAS_OWNER_TOKEN: '', NAS_LEASE: '', SUDO_USER: '', COLUMNS: '100',
    };
    webPort = /"url":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(d.log)?.[1] ?? '';
  });

  afterAll(async () => {
    await d?.cleanup();
  });

  it('starts with the install step (not run here: the test starts nasd itself)', () => {
    expect(blocks[0]).toMatchObject({ lang: 'bash', text: expect.stringMatching(/^scripts\/mount\.sh --demo\s/) });
    expect(blocks.filter((b) => b.lang === 'console').length).toBeGreaterThanOrEqual(6);
  });

  const here = (text: string) => text.replaceAll('/var/lib/agent-nas', d.state).replaceAll('/agents', d.mnt);
  const asPrinted = (text: string) => text.replaceAll(d.state, '/var/lib/agent-nas').replaceAll(d.mnt, '/agents')
    .replaceAll(`127.0.0.1:${webPort}/`, '127.0.0.1:7465/').replace(/^bash: line \d+: /gm, 'bash: ').replace(/\n$/, '');

  for (const block of blocks.filter((b) => b.lang === 'console')) {
    it(`${block.heading}: ${steps(block.text).map((s) => s.command.split(' ').slice(0, 3).join(' ')).join('; ')}`, async () => {
      for (const { command, expected } of steps(block.text)) {
        const r = await run('bash', ['-c', `ls() { command ls -C "$@"; }; { ${here(command)}\n} 2>&1`], { env, cwd: d.dir });
        const printed = asPrinted(r.stdout);
        expect(printed, `$ ${command}`).toMatch(printedPattern(expected));
        const shellError = expected.some((l) => l.startsWith('bash: '));
        expect([command, shellError ? r.code !== 0 : r.code === 0], printed).toEqual([command, true]);
      }
    });
  }
});
