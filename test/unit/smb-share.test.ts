import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { includes, install, render, sections, template } from '../../src/cli/smb-share.js';

/** nas share smb's pieces without a daemon: the shipped definition, its path, and the install into an smb.conf. */
describe('SMB share definition', () => {
  it('ships [agents] with the settings a FUSE-backed share needs, and sets only its path', async () => {
    const text = await template();
    expect(sections(text)).toEqual(['agents']);
    const out = render(text, '/srv/agents');
    expect(out.match(/^\s*path = .*$/gm)).toEqual(['\tpath = /srv/agents']);
    expect(out.replace(/^\s*path = .*$/m, '')).toBe(text.replace(/^\s*path = .*$/m, ''));
    const settings = Object.fromEntries([...out.matchAll(/^\s*([a-z0-9 :]+?)\s*=\s*(.*)$/gm)].map((m) => [m[1], m[2]]));
    expect(settings).toMatchObject({
      oplocks: 'no', 'level2 oplocks': 'no', 'kernel oplocks': 'no', 'durable handles': 'no', 'ea support': 'no',
      'store dos attributes': 'no', 'map archive': 'no', 'map hidden': 'no', 'map system': 'no', 'case sensitive': 'yes',
      'vfs objects': 'catia', 'read only': 'no',
    });
    expect(settings['vfs objects']).not.toMatch(/streams_xattr/);
    expect(Object.keys(settings)).not.toContain('force user');
  });

  it('refuses a mount smb.conf cannot hold in a path', () => {
    expect(() => render('[agents]\n path = /agents\n', 'relative')).toThrow(/absolute/);
    expect(() => render('[agents]\n path = /agents\n', '/a%b')).toThrow(/newline or %/);
    expect(() => render('[agents]\n path = /agents\n', '/a\nb')).toThrow(/newline or %/);
  });

  it('installs beside smb.conf once, refusing an [agents] smb.conf defines itself', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nas-smb-unit-'));
    try {
      const conf = path.join(dir, 'smb.conf');
      await fs.writeFile(conf, '[global]\n  workgroup = X\n;include = /elsewhere.conf');
      const first = await install('/srv/agents', path.relative(process.cwd(), conf));
      expect(first).toMatchObject({ file: path.join(dir, 'agent-nas.conf'), smb_conf: conf, wrote_file: true, added_include: true });
      const text = await fs.readFile(conf, 'utf8');
      expect(includes(text, path.join(dir, 'agent-nas.conf'))).toBe(true);
      expect(includes(';include = /elsewhere.conf', '/elsewhere.conf')).toBe(false);
      expect(text.startsWith('[global]\n  workgroup = X\n;include = /elsewhere.conf\n')).toBe(true);
      expect(await install('/srv/agents', conf)).toMatchObject({ wrote_file: false, added_include: false });
      expect(await fs.readFile(conf, 'utf8')).toBe(text);
      // A new mount rewrites the definition, not the include line.
      expect(await install('/srv/other', conf)).toMatchObject({ wrote_file: true, added_include: false });
      expect(await fs.readFile(path.join(dir, 'agent-nas.conf'), 'utf8')).toMatch(/^\tpath = \/srv\/other$/m);
      await fs.appendFile(conf, '\n[Agents]\n  path = /tmp\n');
      await expect(install('/srv/agents', conf)).rejects.toThrow(/defines a share \[agents\] of its own/);
      await expect(install('/srv/agents', path.join(dir, 'none.conf'))).rejects.toThrow(/does not exist: install Samba/);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
