import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse, Usage } from '../../src/cli/args.js';
import { lookup } from '../../src/cli/commands/index.js';
import { parseAttempts, parseSize, resolveProgram, runAccount } from '../../src/cli/run/inputs.js';
import { lookupAccount } from '../../src/util/accounts.js';

/** What nas run checks before it asks nasd for anything (a refused run creates nothing). */
describe('nas run input', () => {
  it('takes everything after -- as the command, untouched, and routes run <role> apart from run list', () => {
    const args = parse(['run', 'demo', '--user', 'nobody', '--', 'sh', '-c', 'echo --json', '--help'], '/s');
    expect(args.positional).toEqual(['run', 'demo']);
    expect(args.rest).toEqual(['sh', '-c', 'echo --json', '--help']);
    expect(args.json).toBe(false);
    expect(args.help).toBe(false);
    expect(lookup(args.positional)?.name).toBe('run');
    expect(lookup(['run', 'list', 'demo'])?.name).toBe('run list');
    expect(lookup(['run', 'pick', 'demo', 't1', 'r1'])?.name).toBe('run pick');
    expect(lookup(['hook', 'session-start'])?.name).toBe('hook session-start');
  });

  it('reads sizes in binary units and refuses what is not one', () => {
    expect(parseSize('50M', '--budget')).toBe(50 * 1024 ** 2);
    expect(parseSize('2G', '--budget')).toBe(2 * 1024 ** 3);
    expect(parseSize('512k', '--budget')).toBe(512 * 1024);
    expect(parseSize('10MiB', '--budget')).toBe(10 * 1024 ** 2);
    expect(parseSize('1000', '--budget')).toBe(1000);
    for (const bad of ['5X', '-1M', '', 'M', '1.5G']) expect(() => parseSize(bad, '--budget')).toThrow(Usage);
  });

  it('takes 1 to 16 attempts', () => {
    expect(parseAttempts(undefined)).toBe(1);
    expect(parseAttempts('16')).toBe(16);
    for (const bad of ['0', '17', 'two', '-1', '1.5']) expect(() => parseAttempts(bad)).toThrow(/from 1 to 16/);
  });

  it('runs as the user sudo was called by, and never as root', async () => {
    const saved = process.env.SUDO_USER;
    try {
      process.env.SUDO_USER = 'nobody';
      expect((await runAccount(undefined)).uid).toBe(65534);
      process.env.SUDO_USER = '';
      await expect(runAccount(undefined)).rejects.toThrow(/name an unprivileged user with --user/);
      await expect(runAccount('root')).rejects.toThrow(/a run cannot be root/);
      await expect(runAccount('0')).rejects.toThrow(/a run cannot be root/);
      expect((await runAccount('65534')).name).toBe('nobody');
      await expect(runAccount('no-such-user-here')).rejects.toThrow(/no local user "no-such-user-here"/);
    } finally {
      process.env.SUDO_USER = saved;
    }
  });

  it('finds the program in PATH or by path, and says why one cannot run', async () => {
    const nobody = (await lookupAccount('nobody'))!;
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-run-inputs-'));
    await fs.chmod(dir, 0o755);
    try {
      const home = async () => dir;
      expect(await resolveProgram('sh', nobody, home)).toMatch(/\/sh$/);
      await fs.writeFile(`${dir}/tool.sh`, '#!/bin/sh\n', { mode: 0o755 });
      await fs.writeFile(`${dir}/private.sh`, '#!/bin/sh\n', { mode: 0o700 });
      await fs.mkdir(`${dir}/sub`);
      // A path not found where nas run was called is the Home's, and goes on as given (the run starts there).
      expect(await resolveProgram('./tool.sh', nobody, home)).toBe('./tool.sh');
      expect(await resolveProgram(`${dir}/tool.sh`, nobody, home)).toBe(`${dir}/tool.sh`);
      await expect(resolveProgram(`${dir}/private.sh`, nobody, home)).rejects.toThrow(/not executable by nobody/);
      expect(await resolveProgram(`${dir}/private.sh`, (await lookupAccount('root'))!, home)).toBe(`${dir}/private.sh`);
      await expect(resolveProgram(`${dir}/sub`, nobody, home)).rejects.toThrow(/is not a file/);
      // Executable, but behind a directory nobody may enter.
      await fs.mkdir(`${dir}/closed`, { mode: 0o700 });
      await fs.writeFile(`${dir}/closed/tool.sh`, '#!/bin/sh\n', { mode: 0o755 });
      await expect(resolveProgram(`${dir}/closed/tool.sh`, nobody, home)).rejects.toThrow(/not executable by nobody/);
      await expect(resolveProgram('no-such-program-xyz', nobody, home)).rejects.toThrow(/command not found: no-such-program-xyz/);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
