import { releaseHup } from './held-hup.js';
import fs, { accessSync, constants } from 'node:fs';
import os from 'node:os';
import { pino, type Logger } from 'pino';
import { UserError } from '../util/errors.js';
import { loadConfig, USAGE } from './config.js';
import { HomeSet } from '../homes/home-set.js';
import { MountTable } from '../homes/mount-table.js';
import type { ActiveRun } from '../homes/run-tracker.js';
import { openWorkflows } from '../workflows/all.js';
import { CheckDirs } from '../merge/check-sandbox.js';
import { preflight, mountFuse, fuseMountedAt, type FuseMount } from '../fuse-ops/mount.js';
import path from 'node:path';
import { RunSockets, serveControl } from './control.js';
import { handlers } from './handlers.js';
import { WebLogins } from './web-sessions.js';
import { serveWeb } from './web-server.js';
import { PathOps } from '../fuse-ops/ops.js';
import { Home } from '../home/home.js';
import { loadOwnerToken } from './auth.js';
import { watchMainRefs } from './ref-watcher.js';
import { ScratchBinds } from '../fuse-ops/scratch-binds.js';
import { countTokens } from '../memory/tokens.js';
import { version } from '../util/version.js';
import { mountCall, startInBackground } from './mount-helper.js';
import { openFileLimits } from './file-limit.js';
import { OpenFiles } from '../fuse-ops/open-files.js';
import { WallClock } from '../util/clock.js';
import { Refusals } from '../homes/refusals.js';
import { becomeSuccessor, inheritedConnection, leaveForSuccessor, storeConnection } from './handover.js';
import { journalPrefixer, notifyReady, notifyReloading, notifyStopping } from './sd-notify.js';
import { meter } from '../metrics/meter.js';
import { MetricsSampler } from '../workflows/metrics-sample.js';
import { serveMetrics } from './metrics-server.js';
import { parseListen } from './web-server.js';
import { Cluster } from '../cluster/cluster.js';

/** Whether Node and nasd's script are still where this process started from (a reload runs them again). */
function canRunAgain(): boolean {
  try {
    accessSync(process.execPath, constants.X_OK);
    accessSync(process.argv[1], constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** nasd: open the Homes (recovering what a crash left), mount them, serve the control socket, and shut down cleanly. */
async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(USAGE);
    return;
  }
  if (argv.includes('--version')) {
    process.stdout.write(`nasd ${version()}\n`);
    return;
  }
  const asHelper = mountCall(argv);
  if (asHelper) {
    const pid = await startInBackground(process.argv[1], asHelper);
    process.stdout.write(`nasd is serving ${asHelper.flags[1]} (pid ${pid}, log ${asHelper.log}); umount ${asHelper.flags[1]} stops it\n`);
    return;
  }
  const config = await loadConfig(argv);
  // Under systemd each line goes to the journal at its level's priority (sd-notify.ts).
  const toJournal = journalPrefixer(() => fs.fstatSync(1));
  const log = pino({ level: config.log_level, base: { pid: process.pid, host: os.hostname() }, ...(toJournal ? { hooks: { streamWrite: toJournal } } : {}) });
  // Counted from the start (recovery's commits, the first FUSE requests); served once the mount is up.
  if (parseListen(config.metrics_listen, 'metrics_listen')) meter.enable();
  const binds = new ScratchBinds(log);
  // A restart under systemd: the kernel connection the nasd before handed on (handover.ts).
  const inherited = await inheritedConnection(config.state_dir, config.mount, log);
  if (!inherited) await preflight(config.mount, log);
  // A connection an older nasd set up has no POSIX ACLs: lease holders share nothing until nasd mounts afresh.
  const acls = inherited?.acls ?? true;
  if (!acls) log.warn('this kernel connection was set up by a nasd without POSIX ACLs (an upgrade by reload): write-lease holders cannot work in what the Home owner owns until `systemctl restart nasd`');
  const homes = new HomeSet({
    stateDir: config.state_dir,
    mount: config.mount,
    identity: config.identity,
    owner: config.owner,
    windowMs: config.commit_window_ms,
    log,
    binds,
    templatesDir: config.templates_dir,
    clock: new WallClock(config.test_clock_offset_file),
    acls,
  });
  const openFiles = new OpenFiles(await openFileLimits(config, log), log);
  await homes.ensureStateDir();
  // In a cluster, every Home is matched with its repository on the git server before it opens (cluster/seed.ts):
  // the demo Home too, made here only if no host put one there.
  const cluster = config.cluster ? await Cluster.join(config.cluster, config.state_dir, log, version()) : null;
  if (config.demo && !(await Home.list(config.state_dir)).includes('demo')) {
    await Home.create(config.state_dir, 'demo', { owner: 'root', identity: config.identity });
    log.info('created the demo Home');
    await cluster?.seed('demo');
  }
  await homes.load();
  const ownerToken = await loadOwnerToken(config.state_dir);
  const runSockets = new RunSockets();
  const refusals = new Refusals();
  // Custom checks' directories, beside runs/ in the runtime directory (check-sandbox.ts says why not the state's).
  const checkDirs = new CheckDirs(path.join(path.dirname(config.socket), 'checks'));
  const flows = openWorkflows(homes, { stateDir: config.state_dir, runsDir: path.join(path.dirname(config.socket), 'runs'), checkDirs, runSockets, log, refusals, cluster });
  const { leases, runs, maintenance, remotes } = flows;
  await leases.applyAll();
  await runs.recover();
  await checkDirs.prepare(log);
  const web = new WebLogins();
  const table = new MountTable(homes);
  const ops = new PathOps(table, log, openFiles, refusals);
  const mount: FuseMount = (await mountFuse(config.mount, ops, log, { pageCache: (p) => table.readOnly(p), takeover: inherited ?? undefined, shared: homes.sharedViews() }));
  if (inherited) {
    ops.inheritHandles(inherited.handles);
    // What changed while no nasd served (commits at stop, a push), or was not told the kernel then: forgotten.
    void mount.invalidate(null);
  }
  const kept = storeConnection(mount.fd());
  // The kernel learns the root's attributes now, for good (they never change): with the connection kept, systemd
  // stats the mount point while it starts the next nasd, when no one would answer. Asynchronously: this process
  // answers the request.
  void fs.promises.stat(config.mount).catch((err) => log.warn({ err }, 'cannot stat the mount point'));
  homes.kernelCache = { forget: (roles) => mount.invalidate(roles), share: (names) => mount.share(names), stats: () => mount.stats() };
  const confine = (run: ActiveRun, active: boolean) => mount.restrict(run.ns, active ? table.namesOfRun(run) : null);
  homes.runs.onChange = confine;
  for (const run of homes.runs.all()) confine(run, true);
  // Binds made before a hand-over are still there, on the same mount.
  await binds.start(homes.allScratchBinds(), { adopt: !!inherited });
  const routes = handlers(flows, web, config.state_dir);
  const server = await serveControl(config.socket, routes, ownerToken, config.socket_group, log, runSockets).catch(async (err) => {
    await binds.stop();
    await mount.unmount();
    throw err;
  });

  // Elections, following main and the queue start once the mount serves: a merge shows in it at once.
  await cluster?.attach({
    roles: () => homes.roles(), storeOf: (r) => homes.find(r)?.home.store ?? null, refreshMains: () => homes.refreshMains(),
    open: async (r) => void (await homes.open(await Home.open(config.state_dir, r, config.identity))),
    showElsewhere: (r, branches) => homes.showElsewhere(r, branches),
  }, flows.prs, flows.branches).catch(async (err) => {
    // A host of the same name that started meanwhile: this one goes, leaving nothing mounted.
    server.close();
    await binds.stop();
    await mount.unmount();
    throw err;
  });
  const webServer = await serveWeb(config.web_listen, routes, web, log);
  const sampler = new MetricsSampler(homes, (role) => remotes.health(role));
  meter.sampleWith(() => sampler.sample());
  const metricsServer = await serveMetrics(config.metrics_listen, log);

  // TTLs every 5 s (below); the recycle area's window once an hour (and a minute after start).
  await maintenance.expireBranches();
  const firstHourly = setTimeout(() => void maintenance.hourly(), 60_000);
  const hourly = setInterval(() => void maintenance.hourly(), 3_600_000);
  firstHourly.unref();
  hourly.unref();

  // Follow main at once when it moves outside a view (a merge, an operator's push); the tick lets lease
  // expiry take effect without a request, and re-reads main in case a change escaped the watcher.
  const refresh = () => homes.refreshMains().catch((err) => log.error({ err }, 'cannot re-read main'));
  const refs = watchMainRefs(config.state_dir, refresh, log);
  const follow = setInterval(() => {
    keepUmask(log);
    refresh();
    void leases.applyAll();
    void runs.reapOrphans().catch((err) => log.error({ err }, 'cannot check runs'));
    void maintenance.expireBranches();
    void remotes.tick();
    // `umount` (or fusermount -u) from outside ends the service: commit what is pending and go.
    void fuseMountedAt(config.mount).then((mounted) => {
      if (!mounted && !stopping) {
        log.warn({ mount: config.mount }, 'the mount was removed from outside: stopping');
        void stop('umount');
      }
    });
  }, 5000);
  follow.unref();

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    // A reload hands the connection to the next nasd in this very process (handover.ts becomeSuccessor): only if
    // that nasd can be run at all; else this one goes on serving.
    const reload = signal === 'SIGHUP';
    if (reload && !canRunAgain()) {
      log.error({ node: process.execPath, script: process.argv[1] }, 'reload refused: nasd cannot be run again from where it was started; still serving');
      return;
    }
    stopping = true;
    if (reload) notifyReloading();
    else void notifyStopping();
    log.info({ signal }, reload ? 'reloading: committing pending changes, then this process becomes the next nasd' : 'stopping: committing pending changes, then unmounting');
    clearInterval(follow);
    clearInterval(hourly);
    clearTimeout(firstHourly);
    await refs.close();
    // No request of the control API may change a view (and wait on an invalidation) while requests are paused.
    server.close();
    webServer?.close();
    // With the connection kept in a descriptor store, the mount outlives this process and the next nasd takes
    // it over. Every request taken is answered first.
    const handOn = (kept || reload) && signal !== 'umount' ? await mount.suspend() : null;
    try {
      webServer?.closeAllConnections();
      metricsServer?.close();
      metricsServer?.closeAllConnections();
      await runs.close();
      await cluster?.close();
      if (!handOn) await binds.stop(signal === 'umount');
      await homes.close();
      if (handOn?.drained) {
        await leaveForSuccessor(config.state_dir, config.mount, handOn, ops.openHandles(), acls);
        if (reload) {
          const errno = becomeSuccessor(mount.fd());
          throw new Error(`cannot run nasd again (${process.execPath}): errno ${errno}`);
        }
        log.info('stopped: the kernel connection stays in the descriptor store for the next nasd');
        process.exit(0);
      }
      if (handOn) log.warn('stopped with requests unanswered after 30 s: the next nasd mounts afresh');
    } catch (err) {
      // Requests are paused (or no nasd follows): nothing would answer them. The mount goes; systemd's Restart=
      // mounts afresh.
      log.error({ err }, 'stop failed: unmounting');
      if (await fuseMountedAt(config.mount)) await mount.unmount();
      process.exit(1);
    }
    if ((!handOn || reload) && (await fuseMountedAt(config.mount))) await mount.unmount();
    log.info('stopped');
    process.exit(reload ? 1 : 0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // SIGHUP was held while nasd started (a reload's successor included): from now on it reloads.
  process.on('SIGHUP', () => void stop('SIGHUP'));
  const ignored = releaseHup();
  if (ignored > 0) log.warn({ ignored }, 'SIGHUP while nasd was starting (a reload in progress): ignored');
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));
  log.info({ mount: config.mount, state: config.state_dir, socket: config.socket }, 'nasd ready');
  // Type=notify: systemd holds units ordered after nasd.service until now, when the mount and the socket serve.
  await notifyReady(`serving ${config.mount}, control socket ${config.socket}`);
  // Loading the tokenizer takes some 400 ms: done once, soon after start, so the first nas run's briefing does not wait for it.
  setTimeout(() => countTokens(''), 1000).unref();
}

main().catch((err) => {
  if (err instanceof UserError) process.stderr.write(`nasd: ${err.message}\n`);
  else process.stderr.write(`nasd: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});

/**
 * libgit2 reads the umask by setting it to 0 for a moment (git_futils_mktmp, on libuv's threads): two such reads at
 * once can leave the process at 0, and whatever nasd or a child made then would be open to everyone. Set back at
 * every tick (one syscall, no read of its own), and said, so the window is bounded and seen.
 */
function keepUmask(log: Logger): void {
  const was = process.umask(0o077);
  if (was !== 0o077) log.warn({ umask: was.toString(8) }, 'the process umask was not 077 (libgit2 sets it to 0 to read it); set back');
}
