import fs from 'node:fs/promises';
import yaml from 'js-yaml';
import { UserError } from '../util/errors.js';
import { DEFAULT_SOCKET } from '../api/client.js';
import { parseListen } from './web-server.js';
import { parseCluster, type ClusterConfig } from '../cluster/config.js';

/** nasd's own settings: a YAML file (default /etc/agent-nas/nasd.yaml, optional) overridden by flags. */
export interface DaemonConfig {
  state_dir: string;
  mount: string;
  socket: string;
  commit_window_ms: number;
  identity: { name: string; email: string };
  owner: { uid: number; gid: number };
  /** Create a Home named "demo" at start if there is none. */
  demo: boolean;
  /** Group (name or gid) given access to the control socket, so runs can propose with their lease. */
  socket_group: string | null;
  log_level: string;
  /** Where named Home templates live: `nas home create --template <name>` reads `<templates_dir>/<name>/`. */
  templates_dir: string;
  /** Where the web page (the Human Gate) listens: host:port, or off. */
  web_listen: string;
  /** Where Prometheus scrapes /metrics: host:port (port 0: any free one, logged and in nas status), or off. */
  metrics_listen: string;
  /** Files one user may hold open through the mount at once; one more gets EMFILE. */
  open_files_per_user: number;
  /** Files that may be open in one branch (or main) at once, whoever holds them; one more gets EMFILE. */
  open_files_per_branch: number;
  /** Descriptors nasd keeps for itself (commits, git, sockets): files open through the mount stop this far below its RLIMIT_NOFILE. */
  open_files_reserve: number;
  /** Several hosts serving the same Homes (src/cluster/config.ts): null is one host. */
  cluster: ClusterConfig | null;
  /** Tests only (the hidden flag --test-clock-offset-file, not a setting): a file of milliseconds added to the clock TTLs read. */
  test_clock_offset_file?: string;
}

export const DEFAULT_CONFIG_PATH = '/etc/agent-nas/nasd.yaml';

export const DEFAULTS: DaemonConfig = {
  state_dir: '/var/lib/agent-nas',
  mount: '/agents',
  socket: DEFAULT_SOCKET,
  commit_window_ms: 100,
  identity: { name: 'nasd', email: 'nasd@localhost' },
  owner: { uid: 0, gid: 0 },
  demo: false,
  socket_group: null,
  log_level: 'info',
  templates_dir: '/etc/agent-nas/templates',
  web_listen: '127.0.0.1:7465',
  metrics_listen: 'off',
  open_files_per_user: 4096,
  open_files_per_branch: 8192,
  open_files_reserve: 2048,
  cluster: null,
};

const FLAGS: Record<string, keyof DaemonConfig> = {
  '--state-dir': 'state_dir',
  '--mount': 'mount',
  '--socket': 'socket',
  '--commit-window-ms': 'commit_window_ms',
  '--log-level': 'log_level',
  '--socket-group': 'socket_group',
  '--templates-dir': 'templates_dir',
  '--web-listen': 'web_listen',
  '--metrics-listen': 'metrics_listen',
};

export const USAGE = `usage: nasd [--config FILE] [--state-dir DIR] [--mount DIR] [--socket PATH]
            [--commit-window-ms N] [--log-level LEVEL] [--socket-group GROUP] [--templates-dir DIR]
            [--web-listen HOST:PORT|off] [--metrics-listen HOST:PORT|off] [--demo] [--version]
            [--print-config KEY]

Serves every Home in the state directory through one FUSE mount:
  <mount>/<role>            main, read-only (EROFS)
  <mount>/<role>@<branch>   a branch, writable; closed files become commits

  --config FILE          YAML settings (default ${DEFAULT_CONFIG_PATH}, used if present)
  --state-dir DIR        where Homes are stored (default ${DEFAULTS.state_dir})
  --mount DIR            mount root (default ${DEFAULTS.mount})
  --socket PATH          control socket for the nas CLI (default ${DEFAULT_SOCKET})
  --commit-window-ms N   batch closes within N ms into one commit (default ${DEFAULTS.commit_window_ms})
  --log-level LEVEL      pino level: debug, info, warn, error (default info)
  --socket-group GROUP   let this group use the socket (runs propose with their lease; default root only)
  --templates-dir DIR    named Home templates, one directory each (default ${DEFAULTS.templates_dir})
  --web-listen ADDR      the web page for reviews (nas web open): host:port or off (default ${DEFAULTS.web_listen})
  --metrics-listen ADDR  Prometheus metrics at http://ADDR/metrics: host:port or off (default off)
  --demo                 create a Home named "demo" if it does not exist

As a mount helper (mount -t fuse.nasd, /etc/fstab, a systemd .mount unit):
  nasd <source> <mountpoint> [-o state_dir=DIR,socket=PATH,socket_group=G,web_listen=ADDR,metrics_listen=ADDR,
                               templates_dir=DIR,log_level=L,config=FILE,log=FILE,demo]
  starts nasd in the background (log in /var/log/agent-nas/nasd.log unless log=) and returns once it serves;
  umount <mountpoint> (umount -R when branches have workspace/ binds) stops it.
  A second instance needs its own state_dir, socket and web_listen (e.g. 127.0.0.1:0 for any free port, or off).

nasd --print-config KEY [flags]: print one setting as nasd would use it (the file and the same flags), e.g.
  nasd --print-config mount; the systemd unit asks it for the socket and the mount point.

Signals: SIGTERM commits what is pending and unmounts; SIGHUP (systemctl reload) commits, then runs nasd again
in this process, keeping the mount: shells and files open inside it carry on (an upgrade of the checkout).
`;

/**
 * `--print-config KEY` among the flags: that setting as loadConfig settles it (the file, then the other flags),
 * or null when the flag is absent.
 */
export async function printedConfig(argv: string[]): Promise<string | null> {
  const at = argv.indexOf('--print-config');
  if (at < 0) return null;
  const key = argv[at + 1];
  if (!key || !(key in DEFAULTS)) throw new UserError(`--print-config needs a setting: one of ${Object.keys(DEFAULTS).join(', ')}`);
  const config = await loadConfig([...argv.slice(0, at), ...argv.slice(at + 2)]);
  const value = config[key as keyof DaemonConfig];
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}

export async function loadConfig(argv: string[]): Promise<DaemonConfig> {
  let file: string | undefined;
  const overrides: Partial<Record<keyof DaemonConfig, unknown>> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--config') file = argv[++i];
    else if (arg === '--demo') overrides.demo = true;
    // Undocumented on purpose: tests step the clock of branch TTLs with it (see util/clock.ts).
    else if (arg === '--test-clock-offset-file' && argv[i + 1]) overrides.test_clock_offset_file = argv[++i];
    else if (FLAGS[arg]) {
      const value = argv[++i];
      if (value === undefined) throw new UserError(`${arg} needs a value\n\n${USAGE}`);
      overrides[FLAGS[arg]] = FLAGS[arg] === 'commit_window_ms' ? Number(value) : value;
    } else throw new UserError(`unknown argument "${arg}"\n\n${USAGE}`);
  }
  let fromFile: Partial<DaemonConfig> = {};
  const path = file ?? DEFAULT_CONFIG_PATH;
  try {
    const text = await fs.readFile(path, 'utf8');
    const doc = yaml.load(text, { schema: yaml.CORE_SCHEMA });
    if (doc && (typeof doc !== 'object' || Array.isArray(doc))) throw new UserError(`${path}: expected a mapping of settings`);
    fromFile = (doc ?? {}) as Partial<DaemonConfig>;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' && !file) fromFile = {};
    else if (e instanceof UserError) throw e;
    else {
      const mark = (e as { mark?: { line: number } }).mark;
      throw new UserError(`cannot read ${path}${mark ? ` (line ${mark.line + 1})` : ''}: ${(e as Error).message}`);
    }
  }
  for (const key of Object.keys(fromFile)) {
    if (!(key in DEFAULTS)) throw new UserError(`${path}: unknown setting "${key}" (known: ${Object.keys(DEFAULTS).join(', ')})`);
  }
  const config = { ...DEFAULTS, ...fromFile, ...overrides } as DaemonConfig;
  if (!Number.isInteger(config.commit_window_ms) || config.commit_window_ms < 0) {
    throw new UserError('commit_window_ms must be a whole number of milliseconds >= 0');
  }
  for (const key of ['state_dir', 'mount', 'socket', 'templates_dir'] as const) {
    if (typeof config[key] !== 'string' || !config[key].startsWith('/')) throw new UserError(`${key} must be an absolute path`);
  }
  for (const key of ['open_files_per_user', 'open_files_per_branch', 'open_files_reserve'] as const) {
    if (!Number.isInteger(config[key]) || config[key] < 1) throw new UserError(`${key} must be a whole number >= 1`);
  }
  config.cluster = parseCluster(fromFile.cluster, path);
  parseListen(String(config.web_listen));
  parseListen(String(config.metrics_listen), 'metrics_listen');
  // A unix socket's path holds at most 107 bytes; each run's socket lives in <dir>/runs/<id>/ beside it.
  const runSocket = `${config.socket.slice(0, config.socket.lastIndexOf('/'))}/runs/r00000000/nasd.sock`;
  if (Buffer.byteLength(runSocket) > 107) {
    throw new UserError(`socket ${config.socket}: its directory is too long for unix sockets (runs' sockets there would be ${Buffer.byteLength(runSocket)} bytes; the limit is 107): choose a shorter path`);
  }
  return config;
}
