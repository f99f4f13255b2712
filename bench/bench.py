#!/usr/bin/env python3
"""Agent NAS benchmark: one run, side by side on this machine, a table of ratios.

Targets: a native directory, bindfs (-o big_writes), fuse-overlayfs, and a nasd branch view (both a
versioned folder, commits included, and workspace/ scratch). Not a test: it prints numbers, it asserts nothing.
On a shared machine absolute times swing several-fold, so every workload runs --reps times, the targets
interleaved (their order rotated each repetition), and each ratio is the median of the ratios of the same
repetition: nasd against a peer measured moments before or after it.

Sections (--only, one or several, comma-separated; default all):
  micro    create/stat/ls -l/readdir/warm stat after the old 1 s window/unlink of many small files, sequential
           I/O, git, close to commit (issue "nasd mounts Homes through FUSE", targets of issue 22); then who
           answers a versioned folder's requests per workload, the binding alone or nasd's JS (4 KiB writes too);
  memory   branch creation in a 1,000-file and a --big-home Home, nasd RSS after walking the big Home;
  agent    what agents run on a real ~6,000-entry source tree (a trimmed copy of the project's node_modules):
           untar, cold find / grep -r / du -s, warm find, git clone, rm -rf (issue "Real tools see a real filesystem");
  restart  bench/restart.mjs: nasd restarted keeping its kernel connection (systemd's fd store, stood in for by
           test/fixtures/fd-store.py) with --branches branches: the longest a stat waits, and errors;
  history  a Home adopted from a --deep-commits repository (bench/deep-repo.mjs): the first find of its main against
           the next, after a restart too, and nasd's memory (issue 34, history depth).
At the end, the targets of issue 22 ("Our own FUSE binding"): each measure, nasd and its peer, the ratio, the target.

  metrics the agent workload on two nasd, /metrics on (scraped every second) and off, interleaved
         (issue 24: the cost of metrics; bench/metrics_cost.py; only when named in --only)

usage: bench/run.sh [--only micro,memory,agent,restart,history,metrics] [--reps N] [--files N] [--seq-mib N] [--big-home N]
                    [--agent-entries N] [--branches N] [--restart-cycles N] [--rounds N] [--deep-commits N] [--deep-files N] [--json FILE]
"""
import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE = shutil.which('node')


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


START = time.perf_counter()


def log(msg):
    print(f'[{time.perf_counter() - START:7.1f}s] {msg}', file=sys.stderr, flush=True)


def drop_caches():
    """Cold caches: the kernel forgets dentries, inodes and pages, so FUSE lookups reach the daemon again."""
    os.sync()
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('3')


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# ---- workloads ---------------------------------------------------------------------------------

def create_files(d, n, after=None):
    os.makedirs(d, exist_ok=True)
    block = os.urandom(4096)

    def run():
        for i in range(n):
            fd = os.open(f'{d}/f{i:05d}', os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            os.write(fd, block)
            os.close(fd)
        if after:
            after()
    return timed(run)


def stat_files(d, n):
    drop_caches()
    return timed(lambda: [os.lstat(f'{d}/f{i:05d}') for i in range(n)])


def readdir(d):
    drop_caches()
    out = []
    t = timed(lambda: out.append(len(os.listdir(d))))
    return t, out[0]


def ls_l(d):
    """Cold `ls -l`: a listing and every entry's attributes (readdirplus where the filesystem has it)."""
    drop_caches()
    out = []
    t = timed(lambda: out.append(subprocess.run(['ls', '-l', '--color=never', d], stdout=subprocess.PIPE, check=True).stdout))
    return t, out[0].count(b'\n') - 1


def stat_after_window(d, n, pause=1.5):
    """Stat all n files, wait past the 1 s attribute and entry timeout FUSE filesystems commonly use, stat them
    again: the second pass, timed, shows whether the kernel still holds what it learnt."""
    for i in range(n):
        os.lstat(f'{d}/f{i:05d}')
    time.sleep(pause)
    return timed(lambda: [os.lstat(f'{d}/f{i:05d}') for i in range(n)])


def unlink_files(d, n, after=None):
    def run():
        for i in range(n):
            os.unlink(f'{d}/f{i:05d}')
        if after:
            after()
    return timed(run)


def seq_write(path, mib, after=None, block=1 << 20):
    buf = os.urandom(block)

    def run():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        for _ in range(mib * ((1 << 20) // block)):
            os.write(fd, buf)
        os.fsync(fd)
        os.close(fd)
        if after:
            after()
    return timed(run)


def seq_read(path):
    drop_caches()

    def run():
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, 1 << 20):
            pass
        os.close(fd)
    return timed(run)


def git_workload(d):
    """git init, add and commit a 1,000-file tree, then git status (the tree is written first, untimed)."""
    os.makedirs(d, exist_ok=True)
    for i in range(10):
        os.makedirs(f'{d}/pkg{i}', exist_ok=True)
        for j in range(100):
            with open(f'{d}/pkg{i}/m{j}.ts', 'w') as f:
                f.write(f'export const v{i}_{j} = {i * j};\n' * 8)
    env = dict(os.environ, GIT_AUTHOR_NAME='b', GIT_AUTHOR_EMAIL='b@b', GIT_COMMITTER_NAME='b', GIT_COMMITTER_EMAIL='b@b')

    def run():
        for args in (['init', '-q'], ['add', '-A'], ['commit', '-qm', 'bench'], ['status', '--porcelain']):
            subprocess.run(['git', *args], cwd=d, env=env, check=True, capture_output=True)
    return timed(run)


# ---- targets -----------------------------------------------------------------------------------

class Nasd:
    """A nasd of its own: state dir, mount point and socket under the bench directory."""

    def __init__(self, root, window_ms=100, extra=()):
        self.root = root
        self.state = f'{root}/state'
        self.mnt = f'{root}/mnt'
        self.sock = f'{root}/nasd.sock'
        os.makedirs(root, exist_ok=True)
        self.log = open(f'{root}/nasd.log', 'w')
        self.proc = subprocess.Popen(
            [NODE, f'{REPO}/dist/src/daemon/main.js', '--state-dir', self.state, '--mount', self.mnt,
             '--socket', self.sock, '--commit-window-ms', str(window_ms), '--log-level', 'warn', '--web-listen', 'off', *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(self.sock) and self._alive():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f'nasd did not start; see {root}/nasd.log')

    def _alive(self):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.sock)
            s.close()
            return True
        except OSError:
            return False

    def nas(self, *args):
        # the owner credential of this daemon (the CLI reads /var/lib/agent-nas/owner.token otherwise)
        env = {k: v for k, v in os.environ.items() if k not in ('NAS_LEASE', 'NAS_OWNER_TOKEN')}
        env['NAS_OWNER_TOKEN_FILE'] = f'{self.state}/owner.token'
        p = subprocess.run([NODE, f'{REPO}/dist/src/cli/main.js', '--socket', self.sock, '--json', *args],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f'nas {" ".join(args)}: exit {p.returncode}: {p.stderr.strip()}')
        return json.loads(p.stdout)

    def store(self, role):
        return f'{self.state}/homes/{role}.git'

    def rss_mb(self):
        with open(f'/proc/{self.proc.pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) / 1024
        return float('nan')

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        subprocess.run(['fusermount', '-uz', self.mnt], capture_output=True)
        self.log.close()


def mount_peers(root):
    """Mount bindfs and fuse-overlayfs under root; on any failure nothing stays mounted."""
    for d in ('native', 'bind-src', 'bindfs', 'ovl-lower', 'ovl-upper', 'ovl-work', 'overlay'):
        os.makedirs(f'{root}/{d}', exist_ok=True)
    try:
        sh('bindfs', '-o', 'big_writes', f'{root}/bind-src', f'{root}/bindfs')
        sh('fuse-overlayfs', '-o', f'lowerdir={root}/ovl-lower,upperdir={root}/ovl-upper,workdir={root}/ovl-work', f'{root}/overlay')
    except BaseException:
        unmount_peers(root)
        raise
    return {'native': f'{root}/native', 'bindfs': f'{root}/bindfs', 'fuse-overlayfs': f'{root}/overlay'}


def unmount_peers(root):
    for m in ('bindfs', 'overlay'):
        subprocess.run(['fusermount', '-uz', f'{root}/{m}'], capture_output=True)


def unmount_below(root):
    """Lazily unmount whatever an earlier, killed run left mounted under the bench directory."""
    root = os.path.realpath(root)
    with open('/proc/self/mounts') as f:
        points = [line.split()[1].encode().decode('unicode_escape') for line in f]
    for p in sorted((p for p in points if p.startswith(root + '/')), key=len, reverse=True):
        subprocess.run(['fusermount', '-uz', p], capture_output=True)
        subprocess.run(['umount', '-l', p], capture_output=True)


def fill_home(nasd, role, n):
    """Give a Home n files on main with git fast-import (as an operator would import an existing Home)."""
    nasd.nas('home', 'create', role)
    store = nasd.store(role)
    main = sh('git', f'--git-dir={store}', 'rev-parse', 'main').stdout.strip()
    msg = f'import {n}'
    lines = [f'commit refs/heads/main\ncommitter bench <b@b> {int(time.time())} +0000\ndata {len(msg)}\n{msg}\nfrom {main}\n']
    for i in range(n):
        content = f'# note {i}\n\nSome text for file {i}.\n'
        lines.append(f'M 100644 inline notes/d{i // 1000:03d}/n{i:06d}.md\ndata {len(content)}\n{content}\n')
    subprocess.run(['git', f'--git-dir={store}', 'fast-import', '--quiet', '--force'], input=''.join(lines).encode(), check=True)
    # nasd follows main within a second
    time.sleep(1.5)


def close_to_commit(nasd, view_dir, store, branch, samples):
    """Seconds from close() to the branch ref naming a commit that holds the file."""
    ref = f'{store}/refs/heads/{branch}'
    out = []
    for i in range(samples):
        before = open(ref).read()
        fd = os.open(f'{view_dir}/lat{i}.md', os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b'latency\n')
        os.close(fd)
        t = time.perf_counter()
        while open(ref).read() == before:
            time.sleep(0.0005)
        out.append(time.perf_counter() - t)
        time.sleep(0.05)
    return out


# ---- repetitions and ratios --------------------------------------------------------------------

def rotated(seq, k):
    """seq with its first k % len(seq) items moved to the end: each repetition starts with another target."""
    k %= len(seq)
    return list(seq[k:]) + list(seq[:k])


def med(xs):
    return statistics.median(xs) if xs else None


def time_ratio(t, ours, peer, key):
    """nasd's time over the peer's, the median of the per-repetition ratios (< 1: nasd faster)."""
    pairs = [o / p for o, p in zip(t[ours][key], t[peer][key]) if p > 0]
    return med(pairs)


def fmt_s(x):
    return '-' if x is None else (f'{x * 1000:.0f} ms' if x < 10 else f'{x:.1f} s')


def md_table(head, rows):
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for r in rows:
        print('| ' + ' | '.join(r) + ' |')


PEERS = ('native', 'bindfs', 'fuse-overlayfs')
TARGETS = ('native', 'bindfs', 'fuse-overlayfs', 'nasd versioned', 'nasd workspace')


def section_table(t, rows, reps):
    """Median seconds of every target per workload, and the ratios the targets are set in."""
    head = ['workload', *TARGETS, 'versioned / bindfs', 'versioned / overlay', 'workspace / native']
    out = []
    for key, label in rows:
        if key not in t['native']:
            continue
        cells = [fmt_s(med(t[n][key])) if t[n].get(key) else '-' for n in TARGETS]
        ratios = []
        for ours, peer in (('nasd versioned', 'bindfs'), ('nasd versioned', 'fuse-overlayfs'), ('nasd workspace', 'native')):
            r = time_ratio(t, ours, peer, key) if t[ours].get(key) else None
            ratios.append('-' if r is None else f'{r:.2f}x')
        out.append([label, *cells, *ratios])
    print(f'Median of {reps} interleaved repetitions; ratios are time over time, the median of each repetition\'s '
          f'ratio (< 1: nasd faster).\n')
    md_table(head, out)


# ---- micro section -----------------------------------------------------------------------------

def micro_rows(a):
    n, mb = a.files, a.seq_mib
    return (
        ('create', f'create+write 4 KiB+close x{n} (versioned: commits incl.)'),
        ('stat_first', f'cold stat x{n}, the first since they were written'),
        ('stat', f'cold stat x{n}, again'),
        ('ls_l', f'cold ls -l of {n}'),
        ('readdir', f'cold readdir of {n}'),
        ('stat_window', f'stat x{n}, 1.5 s after a first pass'),
        ('unlink', f'unlink x{n} (versioned: commit incl.)'),
        ('seq_write', f'sequential write {mb} MiB + fsync (versioned: commit incl.)'),
        ('seq_write_4k', f'sequential write {mb} MiB in 4 KiB writes + fsync (versioned: commit incl.)'),
        ('seq_read', f'sequential read {mb} MiB (cold)'),
        ('git', 'git init+add+commit 1,000 files, status'),
    )


def run_micro(a):
    """The micro section: prints its table and returns what --json writes for it."""
    t = {name: {} for name in TARGETS}
    n = a.files
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(unmount_peers, a.root)
        dirs = mount_peers(a.root)
        nasd = Nasd(f'{a.root}/nasd')
        cleanup.callback(nasd.stop)
        nasd.nas('home', 'create', 'bench')
        nasd.nas('branch', 'create', 'bench/b')
        view = f'{nasd.mnt}/bench@b'
        sync = lambda: nasd.nas('sync', 'bench/b')
        dirs['nasd versioned'] = f'{view}/outbox'
        dirs['nasd workspace'] = f'{view}/workspace'

        def add(name, key, value):
            t[name].setdefault(key, []).append(value)

        for rep in range(a.reps):
            for name in rotated(TARGETS, rep):
                base = dirs[name]
                after = sync if name == 'nasd versioned' else None
                d = f'{base}/small'
                os.sync()  # no writeback left over from the previous target
                add(name, 'create', create_files(d, n, after))
                add(name, 'stat_first', stat_files(d, n))  # nasd: the first since the writes, asked of JS
                add(name, 'stat', stat_files(d, n))  # cold again: the kernel's caches dropped, nasd's has seen them
                secs, count = ls_l(d)
                assert count == n, f'{name}: ls -l saw {count} of {n}'
                add(name, 'ls_l', secs)
                secs, count = readdir(d)
                assert count == n, f'{name}: readdir saw {count} of {n}'
                add(name, 'readdir', secs)
                add(name, 'stat_window', stat_after_window(d, n))
                add(name, 'unlink', unlink_files(d, n, after))
                os.sync()
                add(name, 'seq_write', seq_write(f'{base}/seq.bin', a.seq_mib, after))
                add(name, 'seq_read', seq_read(f'{base}/seq.bin'))
                os.unlink(f'{base}/seq.bin')
                os.sync()
                add(name, 'seq_write_4k', seq_write(f'{base}/seq.bin', a.seq_mib, after, 4096))
                os.unlink(f'{base}/seq.bin')
                if after:
                    after()
                if name != 'nasd versioned':
                    # a .git in a versioned folder is refused by design (nested repositories belong in workspace/)
                    add(name, 'git', git_workload(f'{base}/repo{rep}'))
                    shutil.rmtree(f'{base}/repo{rep}')
            log(f'micro: repetition {rep + 1} of {a.reps} done')

        log('micro: close to commit')
        lat = close_to_commit(nasd, f'{view}/outbox', nasd.store('bench'), 'b', 40)
        leased = leased_ls(nasd, n, a.reps)
        rss_after_workloads = nasd.rss_mb()

    print(f'\n## micro: small files, sequential I/O, git\n')
    section_table(t, micro_rows(a), a.reps)
    p50 = statistics.median(lat)
    print('\n| nasd only | measured | target | met |\n|---|---|---|---|')
    print(f'| close to commit, p50 (p90) | {p50 * 1000:.0f} ms ({sorted(lat)[int(len(lat) * 0.9)] * 1000:.0f} ms) | '
          f'< 1 s | {"yes" if p50 < 1 else "NO"} |')
    print(f'| daemon RSS after all the workloads above | {rss_after_workloads:.0f} MB | - | - |')
    print(f'| cold ls -l of {n:,} in a branch under a lease (its ACLs asked of JS), against it without | '
          f'{statistics.median(leased):.2f}x time | - | - |')
    requests = run_requests_share(a)
    return {'seconds': t, 'close_to_commit_s': lat, 'rss_after_workloads_mb': rss_after_workloads, 'leased_ls_ratio': leased,
            'requests': requests}


def fuse_requests(port):
    """(answered by the binding alone, asked of nasd's JS) since nasd started, from its /metrics."""
    import urllib.request
    text = urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=10).read().decode()
    by = {}
    for line in text.splitlines():
        if line.startswith('nas_fuse_cache_requests{'):
            by[line.split('by="')[1].split('"')[0]] = float(line.rsplit(' ', 1)[1])
    return by.get('cache', 0) + by.get('write', 0), by.get('nasd', 0)


def run_requests_share(a):
    """Who answers a versioned folder's requests, per workload: the binding alone (on libfuse's threads) or nasd's
    JS thread, and how many JS answered per second while the workload ran (one pass, on a nasd of its own with
    /metrics on, so the timed sections above run as configured)."""
    n, mib = a.files, min(a.seq_mib, 64)
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    nasd = Nasd(f'{a.root}/nasd-requests', extra=('--metrics-listen', f'127.0.0.1:{port}'))
    try:
        nasd.nas('home', 'create', 'bench')
        nasd.nas('branch', 'create', 'bench/b')
        d = f'{nasd.mnt}/bench@b/outbox/small'
        sync = lambda: nasd.nas('sync', 'bench/b')
        block = os.urandom(4096)

        def write_small():  # sequential writes in 4 KiB buffers, as head, loggers and SMB clients write
            fd = os.open(f'{d}/seq4k.bin', os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            for _ in range(mib * 256):
                os.write(fd, block)
            os.close(fd)
            sync()
        steps = (
            (f'create+write 4 KiB+close x{n} (commits incl.)', lambda: create_files(d, n, sync)),
            (f'cold stat x{n}', lambda: stat_files(d, n)),
            (f'cold ls -l of {n}', lambda: ls_l(d)[0]),
            (f'unlink x{n} (commit incl.)', lambda: unlink_files(d, n, sync)),
            (f'sequential write {mib} MiB in 4 KiB writes (commit incl.)', lambda: timed(write_small)),
            (f'sequential read {mib} MiB (cold)', lambda: seq_read(f'{d}/seq4k.bin')),
        )
        rows = []
        for name, step in steps:
            before = fuse_requests(port)
            secs = step()
            after = fuse_requests(port)
            native, js = after[0] - before[0], after[1] - before[1]
            rows.append((name, native, js, secs))
    finally:
        nasd.stop()
    print('\n## who answers a versioned folder\'s requests\n')
    print('One pass. The binding answers cached lookups, attributes, listings and reads of files on disk on libfuse\'s '
          'threads; everything else is a request to nasd\'s JS thread (the metric nas_fuse_cache_requests).\n')
    print('| workload | answered by the binding | by JS | JS share | JS answers per second of the workload |\n|---|---|---|---|---|')
    for name, native, js, secs in rows:
        share = js / (native + js) if native + js else 0
        print(f'| {name} | {native:,.0f} | {js:,.0f} | {share:.0%} | {js / secs:,.0f} |')
    return [{'workload': name, 'binding': native, 'js': js, 'seconds': secs} for name, native, js, secs in rows]


def leased_ls(nasd, n, reps):
    """Cold `ls -l` of n files in a branch while a write lease to another account is in force (each file's ACL is
    asked of nasd's JS once), over the same without one (answered by the binding): time ratios, interleaved."""
    nasd.nas('branch', 'create', 'bench/leased')
    d = f'{nasd.mnt}/bench@leased/outbox/small'
    create_files(d, n, lambda: nasd.nas('sync', 'bench/leased'))
    ratios = []
    for _ in range(reps):
        lease = nasd.nas('lease', 'issue', 'bench/leased', '--principal', '4999', '--ttl', '1h')['lease']['id']
        with_lease, count = ls_l(d)
        assert count == n, f'leased ls -l saw {count} of {n}'
        nasd.nas('lease', 'revoke', 'bench', lease)
        without, count = ls_l(d)
        assert count == n, f'unleased ls -l saw {count} of {n}'
        ratios.append(with_lease / without)
    return ratios


# ---- memory section ----------------------------------------------------------------------------

def run_memory(a):
    """Branch creation and memory on a daemon of their own, so other workloads do not colour them."""
    fresh = Nasd(f'{a.root}/fresh')
    try:
        branch_ms = {}
        for size in (1_000, a.big_home):
            role = f'home{size}'
            log(f'memory: filling a {size:,}-file Home')
            fill_home(fresh, role, size)
            branch_ms[size] = statistics.median(fresh.nas('branch', 'create', f'{role}/try{i}')['createdInMs'] for i in range(5))
        log('memory: walking the big Home')
        # walk the big Home through the mount (readdir and lstat of every file), then read the daemon's memory
        rss_before_walk = fresh.rss_mb()
        walked = 0
        for dirpath, _, files in os.walk(f'{fresh.mnt}/home{a.big_home}@try0'):
            for f in files:
                os.lstat(f'{dirpath}/{f}')
                walked += 1
        rss = fresh.rss_mb()
    finally:
        fresh.stop()
    print(f'\n## memory: branch creation and nasd RSS\n')
    print('| nasd only | measured | target | met |\n|---|---|---|---|')
    for size in (1_000, a.big_home):
        print(f'| branch creation, {size:,}-file Home | {branch_ms[size]:.1f} ms | < 20 ms | {"yes" if branch_ms[size] < 20 else "NO"} |')
    print(f'| nasd RSS after walking {walked:,} files (fresh daemon; {rss_before_walk:.0f} MB before) | {rss:.0f} MB | '
          f'< 300 MB | {"yes" if rss < 300 else "NO"} |')
    return {'branch_ms': branch_ms, 'rss_mb': rss, 'rss_before_walk_mb': rss_before_walk, 'walked': walked}


# ---- agent section: real tools on a real source tree ------------------------------------------

# Not part of the tree: nasd's native dependency (nodegit) and local caches.
SKIP_TOP = {'nodegit', '.vite', '.vite-temp', '.agent-nas-setup'}
# Native builds and wasm (tiktoken's), whatever package they sit in.
SKIP_EXT = ('.node', '.wasm', '.so', '.dylib', '.dll')
GREP_FOR = 'TODO'


def build_source(src_dir, tree, max_entries, max_bytes=100 << 20):
    """Copy a deterministic part of src_dir into tree: entries in sorted walk order, files over 1 MiB and native
    builds left out, until max_entries entries (files, directories, symlinks) or max_bytes of file content.
    Returns (entries, bytes)."""
    os.makedirs(tree)
    entries = size = 0

    def walk(rel):
        nonlocal entries, size
        for name in sorted(os.listdir(f'{src_dir}/{rel}')):
            if entries >= max_entries:
                return
            r = f'{rel}/{name}'.lstrip('/')
            if not rel and name in SKIP_TOP:
                continue
            src, dst = f'{src_dir}/{r}', f'{tree}/{r}'
            st = os.lstat(src)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            elif os.path.isdir(src):
                os.mkdir(dst)
                entries += 1
                walk(r)
                shutil.copystat(src, dst)
                continue
            elif os.path.isfile(src):
                if st.st_size > 1 << 20 or name.endswith(SKIP_EXT) or '.so.' in name or size + st.st_size > max_bytes:
                    continue
                shutil.copy2(src, dst)
                size += st.st_size
            else:
                continue
            entries += 1

    walk('')
    return entries, size


def build_agent_inputs(root, max_entries):
    """The source tree, its tarball, and a bare repository holding it (in a native dir, built once, untimed)."""
    src = f'{root}/src'
    node_modules = os.path.realpath(f'{REPO}/node_modules')
    entries, size = build_source(node_modules, f'{src}/tree', max_entries)
    sh('tar', '-cf', f'{src}/tree.tar', '-C', src, 'tree')
    env = dict(os.environ, GIT_AUTHOR_NAME='b', GIT_AUTHOR_EMAIL='b@b', GIT_COMMITTER_NAME='b', GIT_COMMITTER_EMAIL='b@b')
    git = ['git', f'--git-dir={src}/repo.git', f'--work-tree={src}/tree']
    sh('git', 'init', '-q', '--bare', f'{src}/repo.git')
    sh(*git, 'add', '-A', env=env)
    sh(*git, 'commit', '-qm', 'tree', env=env)
    sh('git', f'--git-dir={src}/repo.git', 'gc', '-q', env=env)
    tracked = sh('git', f'--git-dir={src}/repo.git', 'ls-tree', '-r', '--name-only', 'HEAD').stdout.count('\n')
    return {'tar': f'{src}/tree.tar', 'repo': f'{src}/repo.git', 'from': node_modules, 'entries': entries,
            'bytes': size, 'tar_bytes': os.path.getsize(f'{src}/tree.tar'), 'tracked': tracked}


def run_out(args, ok=(0,)):
    """Run a tool with its output to a pipe (as an agent reading it would); returns stdout."""
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode not in ok:
        raise RuntimeError(f'{" ".join(args)}: exit {p.returncode}: {p.stderr.decode(errors="replace")[-400:]}')
    return p.stdout


AGENT_ROWS = (
    ('untar', 'untar (tar -xf; versioned: commits incl.)'),
    ('find_cold', 'find (cold)'),
    ('grep_cold', f'grep -r {GREP_FOR} (cold)'),
    ('du_cold', 'du -s (cold)'),
    ('find_warm', 'find (warm: the second of two)'),
    ('clone', 'git clone file:// (checkout incl.; versioned: commits incl.)'),
    ('rm', 'rm -rf of the extracted tree (versioned: commits incl.)'),
)


def run_agent(a):
    """The agent section: prints its table and returns what --json writes for it."""
    root = f'{a.root}/agent'
    log('agent: building the source tree, its tarball and repository')
    src = build_agent_inputs(root, a.agent_entries)
    log(f'agent: source tree of {src["entries"]:,} entries, {src["bytes"] / 2**20:.1f} MiB '
        f'({src["tracked"]:,} files in git) from {src["from"]}')
    t = {name: {} for name in TARGETS}
    seen = {name: {} for name in TARGETS}
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(unmount_peers, root)
        base = mount_peers(root)
        nasd = Nasd(f'{root}/nasd')
        cleanup.callback(nasd.stop)
        nasd.nas('home', 'create', 'bench')
        nasd.nas('branch', 'create', 'bench/b')
        view = f'{nasd.mnt}/bench@b'
        base['nasd versioned'] = f'{view}/outbox'
        base['nasd workspace'] = f'{view}/workspace'
        url = f'file://{src["repo"]}'  # file://: the pack protocol, as from a remote (no hard links to the source)

        def after(name):
            if name == 'nasd versioned':
                nasd.nas('sync', 'bench/b')

        def add(name, key, value):
            t[name].setdefault(key, []).append(value)

        # One workload at a time across all targets, so that each peer is measured close in time to nasd.
        for rep in range(a.reps):
            order = rotated(TARGETS, rep)
            dirs = {name: f'{base[name]}/r{rep}' for name in TARGETS}
            for name in order:
                os.makedirs(dirs[name])
            for name in order:
                def untar(d=dirs[name], name=name):
                    # --no-same-owner: agents do not run as root, and tar then does not chown
                    run_out(['tar', '-xf', src['tar'], '--no-same-owner', '-C', d])
                    after(name)
                os.sync()  # start clean: no writeback left over from the previous target
                add(name, 'untar', timed(untar))
            for name in order:
                drop_caches()
                out = []
                add(name, 'find_cold', timed(lambda: out.append(run_out(['find', f'{dirs[name]}/tree']))))
                seen[name]['find'] = out[0].count(b'\n') - 1
            for name in order:
                drop_caches()
                out = []
                # not -l: -l stops reading a file at its first match, without it grep reads every byte
                add(name, 'grep_cold', timed(lambda: out.append(run_out(['grep', '-r', '-F', GREP_FOR, f'{dirs[name]}/tree'], ok=(0, 1)))))
                seen[name]['grep_files'] = len({line.split(b':', 1)[0] for line in out[0].splitlines()})
            for name in order:
                drop_caches()
                out = []
                add(name, 'du_cold', timed(lambda: out.append(run_out(['du', '-s', f'{dirs[name]}/tree']))))
                seen[name]['du_kib'] = int(out[0].split()[0])
            for name in order:
                run_out(['find', f'{dirs[name]}/tree'])
                add(name, 'find_warm', timed(lambda: run_out(['find', f'{dirs[name]}/tree'])))
            for name in order:
                def clone(d=dirs[name], name=name):
                    if name == 'nasd versioned':
                        # A .git in a versioned folder is refused (EPERM, by design: nested repositories belong in
                        # workspace/), so the repository goes to workspace/ and its checkout to the versioned folder.
                        gd = f'{base["nasd workspace"]}/clone-for-versioned{rep}'
                        run_out(['git', 'clone', '-q', '--no-checkout', url, gd])
                        os.mkdir(f'{d}/clone')
                        run_out(['git', f'--git-dir={gd}/.git', f'--work-tree={d}/clone', 'checkout', '-q', '-f'])
                    else:
                        run_out(['git', 'clone', '-q', url, f'{d}/clone'])
                    after(name)
                os.sync()
                add(name, 'clone', timed(clone))
                seen[name]['clone_files'] = sum(len(f) for p, _, f in os.walk(f'{dirs[name]}/clone') if '/.git/' not in p + '/')
            for name in order:
                def rm(d=dirs[name], name=name):
                    run_out(['rm', '-rf', f'{d}/tree'])
                    after(name)
                os.sync()
                add(name, 'rm', timed(rm))
                seen[name]['tree_left_after_rm'] = os.path.exists(f'{dirs[name]}/tree')
            # untimed: the clones go, so the next repetition starts from the same state
            for name in order:
                run_out(['rm', '-rf', dirs[name]])
            run_out(['rm', '-rf', f'{base["nasd workspace"]}/clone-for-versioned{rep}'])
            after('nasd versioned')
            log(f'agent: repetition {rep + 1} of {a.reps} done')
        rss = nasd.rss_mb()
        commits = int(sh('git', f'--git-dir={nasd.store("bench")}', 'rev-list', '--count', 'b').stdout)

    print(f'\n## agent: real tools on a {src["entries"]:,}-entry source tree ({src["bytes"] / 2**20:.1f} MiB, '
          f'{src["tracked"]:,} files; a trimmed copy of node_modules)\n')
    section_table(t, AGENT_ROWS, a.reps)
    print(f'\nversioned git clone: the repository in workspace/, the checkout in the versioned folder '
          f'(a .git there is EPERM by design). nasd: {commits} commits on the branch, RSS {rss:.0f} MB after.')
    # The same work on every target, or a note says where not.
    for n in TARGETS[1:]:
        for k in ('find', 'grep_files', 'clone_files', 'tree_left_after_rm'):
            if seen[n].get(k) != seen['native'].get(k):
                print(f'note: {n} saw {k} = {seen[n].get(k)}, native {seen["native"].get(k)}')
    if seen['native']['find'] != src['entries']:
        print(f'note: find on native saw {seen["native"]["find"]} entries, the tree has {src["entries"]}')
    return {'source': {k: v for k, v in src.items() if k not in ('tar', 'repo')}, 'seconds': t, 'seen': seen,
            'commits': commits, 'rss_mb': rss}


# ---- restart section ---------------------------------------------------------------------------

def run_restart(a):
    """bench/restart.mjs in a process of its own: nasd restarted keeping its kernel connection, a stat loop in a
    child process timing its longest call and counting errors."""
    out = f'{a.root}/restart.json'
    log(f'restart: {a.restart_cycles} restarts with {a.branches} branches')
    p = subprocess.run([NODE, f'{REPO}/bench/restart.mjs', '--cycles', str(a.restart_cycles), '--branches', str(a.branches),
                        '--json', out, '--keep-log', '/tmp/agent-nas-bench-restart.log'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, TMPDIR=a.root))
    if p.returncode != 0:
        raise RuntimeError(f'bench/restart.mjs: exit {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}')
    print('\n## restart\n')
    print(p.stdout.strip())
    with open(out) as f:
        return json.load(f)


def timed_find(d):
    """`find` of a whole view with the kernel's caches dropped: every lookup and getattr reaches nasd."""
    drop_caches()
    t0 = time.perf_counter()
    n = len(sh('find', d).stdout.splitlines())
    return time.perf_counter() - t0, n


def run_history(a):
    """A Home adopted from a deep repository (issue 34, history depth) on a daemon of its own: the first find of its
    main against the first find of a Home with the same files and one commit (what a first listing costs whatever
    the history: nasd's caches are cold in both) and the next one, then the first find after a restart (the
    last-change table read back, not made again), and nasd's memory."""
    src, shallow = f'{a.root}/deep.git', f'{a.root}/shallow.git'
    log(f'history: a repository of {a.deep_commits:,} commits over {a.deep_files:,} files (git fast-import)')
    sh(NODE, f'{REPO}/bench/deep-repo.mjs', src, '--commits', str(a.deep_commits), '--files', str(a.deep_files))
    sh(NODE, f'{REPO}/bench/deep-repo.mjs', shallow, '--commits', '1', '--files', str(a.deep_files))
    nasd = Nasd(f'{a.root}/history')
    try:
        nasd.nas('home', 'adopt', 'shallow', shallow)
        shallow_s, _ = timed_find(f'{nasd.mnt}/shallow')
        rss_before = nasd.rss_mb()
        t0 = time.perf_counter()
        nasd.nas('home', 'adopt', 'deep', src)
        adopt_s = time.perf_counter() - t0
        rss_adopted = nasd.rss_mb()
        log('history: first and second find of main')
        first_s, entries = timed_find(f'{nasd.mnt}/deep')
        rss_first = nasd.rss_mb()
        warm_s, _ = timed_find(f'{nasd.mnt}/deep')
        rss_warm = nasd.rss_mb()
    finally:
        nasd.stop()
    again = Nasd(f'{a.root}/history')
    try:
        restart_s, _ = timed_find(f'{again.mnt}/deep')
        rss_restart = again.rss_mb()
    finally:
        again.stop()
    print(f'\n## history: a Home adopted from {a.deep_commits:,} commits ({entries:,} entries in main)\n')
    print('| nasd only | measured | target | met |\n|---|---|---|---|')
    print(f'| adopt | {adopt_s:.2f} s | - | - |')
    print(f'| first find of main (one-commit Home of the same files: {shallow_s:.2f} s; the next find {warm_s:.2f} s) | '
          f'{first_s:.2f} s | <= 2x the one-commit Home\'s | {"yes" if first_s <= 2 * shallow_s else "NO"} |')
    print(f'| first find of main after a restart | {restart_s:.2f} s | <= 2x the one-commit Home\'s | {"yes" if restart_s <= 2 * shallow_s else "NO"} |')
    print(f'| nasd RSS: before adopt, after it, after the first find, after the next | {rss_before:.0f} / {rss_adopted:.0f} / '
          f'{rss_first:.0f} / {rss_warm:.0f} MB | the finds +< 100 MB | {"yes" if rss_warm - rss_adopted < 100 else "NO"} |')
    return {'adopt_s': adopt_s, 'first_find_s': first_s, 'one_commit_first_find_s': shallow_s, 'next_find_s': warm_s,
            'restart_find_s': restart_s, 'entries': entries, 'rss_before_mb': rss_before, 'rss_adopted_mb': rss_adopted,
            'rss_first_mb': rss_first, 'rss_next_mb': rss_warm, 'rss_restart_mb': rss_restart}


# ---- the targets of issue 22 -------------------------------------------------------------------

def plain(label):
    """A workload's label without what it says of the versioned folder."""
    for note in (' (versioned: commits incl.)', ' (versioned: commit incl.)', '; versioned: commits incl.'):
        label = label.replace(note, '')
    return label


def targets_table(out, a):
    """Each measure of issue 22's targets: nasd, its peer, the ratio, the target, whether it is met."""
    rows = []

    def row(measure, nasd, peer, ratio, target, met):
        rows.append([measure, nasd, peer, ratio, target, '-' if met is None else ('yes' if met else '**NO**')])

    def speed(t, ours, peer, key, label, at_least):
        r = time_ratio(t, ours, peer, key)
        s = 1 / r
        row(label, fmt_s(med(t[ours][key])), f'{fmt_s(med(t[peer][key]))} ({peer})', f'{s:.2f}x {peer} speed',
            f'>= {at_least}x {peer} speed', s >= at_least)

    def slower(t, ours, peer, key, label, at_most):
        r = time_ratio(t, ours, peer, key)
        row(label, fmt_s(med(t[ours][key])), f'{fmt_s(med(t[peer][key]))} ({peer})', f'{r:.2f}x {peer} time',
            f'<= {at_most}x {peer} time', r <= at_most)

    m = out.get('micro', {}).get('seconds')
    g = out.get('agent', {}).get('seconds')
    n = a.files
    if m:
        speed(m, 'nasd versioned', 'bindfs', 'stat_first', f'versioned: cold stat of {n:,} files, the first since written', 1.5)
        speed(m, 'nasd versioned', 'bindfs', 'stat', f'versioned: cold stat of {n:,} files, again', 1.5)
        speed(m, 'nasd versioned', 'bindfs', 'ls_l', f'versioned: cold ls -l of {n:,} files', 1.5)
    if g:
        speed(g, 'nasd versioned', 'bindfs', 'find_cold', 'versioned: cold find, agent tree', 1.0)
        speed(g, 'nasd versioned', 'bindfs', 'grep_cold', f'versioned: cold grep -r {GREP_FOR}, agent tree', 1.0)
        speed(g, 'nasd versioned', 'bindfs', 'du_cold', 'versioned: cold du -s, agent tree', 1.0)
        slower(g, 'nasd versioned', 'native', 'find_warm', 'versioned: warm find, agent tree', 1.2)
    if m:
        speed(m, 'nasd versioned', 'fuse-overlayfs', 'create', f'versioned: create of {n:,} files (commits incl.)', 1.0)
        # issue 34: small writes answered by the binding (write grants)
        speed(m, 'nasd versioned', 'native', 'seq_write_4k', f'versioned: sequential write {a.seq_mib} MiB in 4 KiB writes (commit incl.)', 0.5)
    if g:
        slower(g, 'nasd versioned', 'bindfs', 'untar', 'versioned: untar, agent tree (commits incl.)', 1.5)
        slower(g, 'nasd versioned', 'bindfs', 'clone', 'versioned: git clone, agent tree (commits incl.)', 1.5)
        slower(g, 'nasd versioned', 'bindfs', 'rm', 'versioned: rm -rf, agent tree (commits incl.)', 1.5)
    if m:
        slower(m, 'nasd versioned', 'native', 'stat_window', f'versioned: stat of {n:,}, 1.5 s after a first pass', 1.3)
    for t, steps, where in ((m, micro_rows(a), 'micro'), (g, AGENT_ROWS, 'agent')):
        if not t:
            continue
        for key, label in steps:
            if t['nasd workspace'].get(key):
                slower(t, 'nasd workspace', 'native', key, f'workspace/: {plain(label)}', 1.2)
    mem = out.get('memory')
    if mem:
        row(f'nasd RSS after walking a {mem["walked"]:,}-file Home', f'{mem["rss_mb"]:.0f} MB', '-', '-',
            '< 300 MB (no higher than before)', mem['rss_mb'] < 300)
    rs = out.get('restart')
    if rs:
        row(f'restart keeping the connection, {rs["branches"]} branches: longest stat wait (p50 of cycles)',
            f'{rs["longestWaitMs"]:.0f} ms ({rs["longestWaitP50Ms"]:.0f} ms)', '-', '-', '< 2 s', rs['longestWaitMs'] < 2000)
        row(f'restart: stat errors in {rs["calls"]:,} calls over {len(rs["cycles"])} restarts', str(rs['errors']), '-', '-', '0',
            rs['errors'] == 0 and rs['connectionKeptEveryTime'])
    if not rows:
        return []
    print(f'\n## targets (issue 22: our own FUSE binding)\n')
    print(f'{a.reps} interleaved repetitions; times are medians; each ratio is the median of the per-repetition ratios '
          f'(speed: peer time / nasd time, above 1 nasd is faster; time: nasd time / peer time).\n')
    md_table(['measure', 'nasd', 'peer', 'ratio', 'target', 'met'], rows)
    missed = [r[0] for r in rows if r[5] == '**NO**']
    print(f'\n{len(rows) - len(missed)} of {len(rows)} met' + (f'; missed: {"; ".join(missed)}' if missed else ''))
    return rows


SECTIONS = ('micro', 'memory', 'agent', 'restart', 'history')


def main():
    ap = argparse.ArgumentParser(description='Agent NAS benchmark (as root): prints tables of ratios, asserts nothing.')
    ap.add_argument('--only', help=f'sections to run, comma-separated: {",".join(SECTIONS)} (default: all)')
    ap.add_argument('--reps', type=int, default=5, help='micro, agent: interleaved repetitions (medians)')
    ap.add_argument('--files', type=int, default=5_000, help='micro: small files per target')
    ap.add_argument('--rounds', type=int, default=3, help='metrics: rounds of the workload on each daemon')
    ap.add_argument('--scrape-every', type=float, default=1.0, help='metrics: seconds between scrapes while it runs')
    ap.add_argument('--seq-mib', type=int, default=256, help='micro: size of the sequential file')
    ap.add_argument('--big-home', type=int, default=100_000, help='memory: files in the big Home')
    ap.add_argument('--agent-entries', type=int, default=6_000, help='agent: entries in the source tree')
    ap.add_argument('--branches', type=int, default=20, help='restart: branches mounted')
    ap.add_argument('--restart-cycles', type=int, default=5, help='restart: restarts')
    ap.add_argument('--deep-commits', type=int, default=50_000, help='history: commits of the repository adopted')
    ap.add_argument('--deep-files', type=int, default=5_000, help='history: files of the repository adopted')
    ap.add_argument('--root', default='/var/tmp/agent-nas-bench')
    ap.add_argument('--json')
    a = ap.parse_args()
    only = SECTIONS if not a.only else tuple(s.strip() for s in a.only.split(','))
    for s in only:
        if s not in SECTIONS + ('metrics',):
            ap.error(f'--only: no section {s!r} (sections: {", ".join(SECTIONS)}, metrics)')
    if a.reps < 1:
        ap.error('--reps: at least 1')

    # SIGTERM (a timeout, kill) unwinds like Ctrl-C, so every mount and daemon is cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    unmount_below(a.root)
    shutil.rmtree(a.root, ignore_errors=True)
    os.makedirs(a.root)
    out = {}
    try:
        print(f'Agent NAS benchmark, {time.strftime("%Y-%m-%d %H:%M")}, {os.cpu_count()} cores, load average '
              f'{os.getloadavg()[0]:.1f} at the start; sections: {", ".join(only)}', flush=True)
        runs = {'micro': run_micro, 'memory': run_memory, 'agent': run_agent, 'restart': run_restart, 'history': run_history}
        for s in SECTIONS:
            if s in only:
                out[s] = runs[s](a)
                sys.stdout.flush()
        if 'metrics' in only:
            from metrics_cost import run_metrics_cost
            out['metrics'] = run_metrics_cost(a)
        if any(s in only for s in SECTIONS):
            out['targets'] = targets_table(out, a)
        print(f'\n(load average {os.getloadavg()[0]:.1f} at the end; {time.perf_counter() - START:.0f} s in all)')
        if a.json:
            with open(a.json, 'w') as f:
                json.dump(out, f, indent=2)
    finally:
        unmount_below(a.root)
        shutil.rmtree(a.root, ignore_errors=True)


if __name__ == '__main__':
    main()
