#!/usr/bin/env python3
"""Agent NAS benchmark: one run, side by side on this machine, a table of ratios.

Targets: a native directory, bindfs (-o big_writes), fuse-overlayfs, and a nasd branch view (both a
versioned folder, commits included, and workspace/ scratch). Not a test: it prints numbers, it asserts nothing.

Two sections:
  micro  create/stat/readdir/unlink of many small files, sequential I/O, git, branch creation, daemon memory
         (workloads and targets from the issue "nasd mounts Homes through FUSE");
  agent  what agents run on a real ~6,000-entry source tree (a trimmed copy of the project's node_modules):
         untar, cold find / grep -r / du -s, warm find, git clone, rm -rf
         (workloads and targets from the issue "Real tools see a real filesystem").

  metrics the agent workload on two nasd, /metrics on (scraped every second) and off, interleaved
         (issue 24: the cost of metrics; bench/metrics_cost.py)

usage: bench/run.sh [--only micro|agent|metrics] [--files N] [--seq-mib N] [--big-home N] [--agent-entries N]
                    [--rounds N] [--json FILE]
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


def unlink_files(d, n, after=None):
    def run():
        for i in range(n):
            os.unlink(f'{d}/f{i:05d}')
        if after:
            after()
    return timed(run)


def seq_write(path, mib, after=None):
    buf = os.urandom(1 << 20)

    def run():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        for _ in range(mib):
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
             '--socket', self.sock, '--commit-window-ms', str(window_ms), '--log-level', 'warn', *extra],
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


def fuse_native_floor(root, n):
    """Cold stat of n files on a fuse-native filesystem that does no work: the binding's own cost."""
    mnt = f'{root}/floor'
    os.makedirs(mnt, exist_ok=True)
    proc = subprocess.Popen([NODE, f'{REPO}/bench/floor.cjs', mnt], stdout=subprocess.PIPE, cwd=REPO)
    try:
        proc.stdout.readline()
        return stat_files(f'{mnt}/small', n)
    finally:
        proc.terminate()
        proc.wait(10)
        subprocess.run(['fusermount', '-uz', mnt], capture_output=True)


# ---- report ------------------------------------------------------------------------------------

def fmt_s(x):
    return '-' if x is None else (f'{x * 1000:.0f} ms' if x < 10 else f'{x:.1f} s')


def run_micro(a):
    """The micro section: prints its tables and returns what --json writes for it."""
    results = {}
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(unmount_peers, a.root)
        targets = mount_peers(a.root)
        nasd = Nasd(f'{a.root}/nasd')
        cleanup.callback(nasd.stop)
        nasd.nas('home', 'create', 'bench')
        nasd.nas('branch', 'create', 'bench/b')
        view = f'{nasd.mnt}/bench@b'
        sync = lambda: nasd.nas('sync', 'bench/b')
        targets['nasd versioned'] = f'{view}/outbox'
        targets['nasd workspace'] = f'{view}/workspace'

        n = a.files
        for name, base in targets.items():
            after = sync if name == 'nasd versioned' else None
            d = f'{base}/small'
            r = results.setdefault(name, {})
            r['create'] = create_files(d, n, after)
            r['stat'] = stat_files(d, n)
            r['readdir'], count = readdir(d)
            assert count == n, f'{name}: readdir saw {count} of {n}'
            r['unlink'] = unlink_files(d, n, after)
            r['seq_write'] = seq_write(f'{base}/seq.bin', a.seq_mib, after)
            r['seq_read'] = seq_read(f'{base}/seq.bin')
            os.unlink(f'{base}/seq.bin')
            if after:
                after()
            if name != 'nasd versioned':
                r['git'] = git_workload(f'{base}/repo')
            log(f'measured {name}')

        floor_stat = fuse_native_floor(a.root, n)
        log('close to commit')
        lat = close_to_commit(nasd, f'{view}/outbox', nasd.store('bench'), 'b', 40)
        rss_after_workloads = nasd.rss_mb()

    # Branch creation and memory on a daemon of their own, so earlier workloads do not colour them.
    fresh = Nasd(f'{a.root}/fresh')
    try:
        branch_ms = {}
        for size in (1_000, a.big_home):
            role = f'home{size}'
            log(f'filling a {size}-file Home')
            fill_home(fresh, role, size)
            branch_ms[size] = statistics.median(fresh.nas('branch', 'create', f'{role}/try{i}')['createdInMs'] for i in range(5))
        log('walking the big Home')
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

    bind, ovl = results['bindfs'], results['fuse-overlayfs']
    ver, ws = results['nasd versioned'], results['nasd workspace']
    mb = a.seq_mib

    def speed(peer, ours):
        return peer / ours

    rows = []
    def row(what, key, nas_target, ratio, target, ok):
        cells = [results[t].get(key) for t in ('native', 'bindfs', 'fuse-overlayfs')]
        rows.append([what, *[fmt_s(c) for c in cells], fmt_s(results[nas_target].get(key)) + f' ({nas_target.split()[1]})', ratio, target, ok])

    for key, label in (('create', f'create+write 4 KiB+close x{n}'), ('stat', f'cold stat x{n}'), ('readdir', f'readdir of {n}'), ('unlink', f'unlink x{n}')):
        for t in ('nasd versioned', 'nasd workspace'):
            r = results[t][key]
            if key == 'create' and t == 'nasd versioned':
                row(label + ' (commits incl.)', key, t, f'{speed(ovl[key], r):.2f}x overlay', '>= 1.0x overlay', speed(ovl[key], r) >= 1.0)
            elif key in ('stat', 'readdir'):
                row(label, key, t, f'{speed(bind[key], r):.2f}x bindfs', '>= 0.8x bindfs', speed(bind[key], r) >= 0.8)
            else:
                row(label, key, t, f'{speed(bind[key], r):.2f}x bindfs', '-', '')
    for t in ('nasd workspace', 'nasd versioned'):
        r = results[t]['seq_write']
        row(f'sequential write {mb} MiB' + (' (commit incl.)' if 'versioned' in t else ''), 'seq_write', t, f'{speed(bind["seq_write"], r):.2f}x bindfs', '>= 0.8x bindfs', speed(bind['seq_write'], r) >= 0.8)
    for t in ('nasd workspace', 'nasd versioned'):
        r = results[t]['seq_read']
        row(f'sequential read {mb} MiB (cold)', 'seq_read', t, f'{speed(bind["seq_read"], r):.2f}x bindfs', '-', '')
    g = ws['git']
    row('git init+add+commit 1,000 files, status', 'git', 'nasd workspace', f'{g / bind["git"]:.2f}x bindfs time', '<= 1.5x bindfs', g / bind['git'] <= 1.5)

    p50 = statistics.median(lat)
    extra = [
        ['branch creation, 1,000-file Home', f'{branch_ms[1_000]:.1f} ms', '< 20 ms', branch_ms[1_000] < 20],
        [f'branch creation, {a.big_home:,}-file Home', f'{branch_ms[a.big_home]:.1f} ms', '< 20 ms', branch_ms[a.big_home] < 20],
        [f'cold stat x{n} on a do-nothing fuse-native filesystem (the binding\'s floor)', f'{fmt_s(floor_stat)} = {bind["stat"] / floor_stat:.2f}x bindfs', '-', True],
        ['close to commit, p50 (p90)', f'{p50 * 1000:.0f} ms ({sorted(lat)[int(len(lat) * 0.9)] * 1000:.0f} ms)', '< 1 s', p50 < 1],
        [f'daemon RSS after walking {walked:,} files (fresh daemon; {rss_before_walk:.0f} MB before)', f'{rss:.0f} MB', '< 300 MB', rss < 300],
        ['daemon RSS after all the workloads above', f'{rss_after_workloads:.0f} MB', '-', True],
    ]

    head = ['workload', 'native', 'bindfs', 'fuse-overlayfs', 'nasd', 'ratio', 'target', 'met']
    table = [head] + [[str(c) if not isinstance(c, bool) else ('yes' if c else 'NO') for c in r] for r in rows]
    print(f'\n## micro: small files, sequential I/O, git (ratio > 1: nasd faster)\n')
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for r in table[1:]:
        print('| ' + ' | '.join(r) + ' |')
    print('\n| nasd only | measured | target | met |\n|---|---|---|---|')
    for r in extra:
        print(f'| {r[0]} | {r[1]} | {r[2]} | {"yes" if r[3] else "NO"} |')
    return {'results': results, 'branch_ms': branch_ms, 'close_to_commit_s': lat, 'rss_mb': rss,
            'rss_after_workloads_mb': rss_after_workloads}


# ---- agent section: real tools on a real source tree ------------------------------------------

# Not part of the tree: nasd's native dependencies (nodegit, fuse-native) and local caches.
SKIP_TOP = {'nodegit', 'fuse-native', '.vite', '.vite-temp', '.agent-nas-setup'}
# Native builds and wasm (tiktoken's), whatever package they sit in.
SKIP_EXT = ('.node', '.wasm', '.so', '.dylib', '.dll')
GREP_FOR = 'TODO'
TARGETS = ('native', 'bindfs', 'fuse-overlayfs', 'nasd versioned', 'nasd workspace')


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
    ('untar', 'untar (tar -xf)'),
    ('find_cold', 'find (cold)'),
    ('grep_cold', f'grep -r {GREP_FOR} (cold)'),
    ('du_cold', 'du -s (cold)'),
    ('find_warm', 'find (warm: the second of two)'),
    ('clone', 'git clone file:// (checkout incl.)'),
    ('rm', 'rm -rf of the extracted tree'),
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
        dirs = mount_peers(root)
        nasd = Nasd(f'{root}/nasd')
        cleanup.callback(nasd.stop)
        nasd.nas('home', 'create', 'bench')
        nasd.nas('branch', 'create', 'bench/b')
        view = f'{nasd.mnt}/bench@b'
        dirs['nasd versioned'] = f'{view}/outbox'
        dirs['nasd workspace'] = f'{view}/workspace'

        def after(name):
            if name == 'nasd versioned':
                nasd.nas('sync', 'bench/b')

        # One workload at a time across all targets, so that each peer is measured close in time to nasd.
        for name in TARGETS:
            def untar(d=dirs[name], name=name):
                # --no-same-owner: agents do not run as root, and tar then does not chown
                run_out(['tar', '-xf', src['tar'], '--no-same-owner', '-C', d])
                after(name)
            os.sync()  # start clean: no writeback left over from the previous target
            t[name]['untar'] = timed(untar)
        log('agent: untar done')
        for name in TARGETS:
            drop_caches()
            out = []
            t[name]['find_cold'] = timed(lambda: out.append(run_out(['find', f'{dirs[name]}/tree'])))
            seen[name]['find'] = out[0].count(b'\n') - 1
        for name in TARGETS:
            drop_caches()
            out = []
            # not -l: -l stops reading a file at its first match, without it grep reads every byte
            t[name]['grep_cold'] = timed(lambda: out.append(run_out(['grep', '-r', '-F', GREP_FOR, f'{dirs[name]}/tree'], ok=(0, 1))))
            seen[name]['grep_files'] = len({line.split(b':', 1)[0] for line in out[0].splitlines()})
        for name in TARGETS:
            drop_caches()
            out = []
            t[name]['du_cold'] = timed(lambda: out.append(run_out(['du', '-s', f'{dirs[name]}/tree'])))
            seen[name]['du_kib'] = int(out[0].split()[0])
        for name in TARGETS:
            run_out(['find', f'{dirs[name]}/tree'])
            t[name]['find_warm'] = timed(lambda: run_out(['find', f'{dirs[name]}/tree']))
        log('agent: reads done')
        url = f'file://{src["repo"]}'  # file://: the pack protocol, as from a remote (no hard links to the source)
        for name in TARGETS:
            def clone(d=dirs[name], name=name):
                if name == 'nasd versioned':
                    # A .git in a versioned folder is refused (EPERM, by design: nested repositories belong in
                    # workspace/), so the repository goes to workspace/ and its checkout to the versioned folder.
                    gd = f'{dirs["nasd workspace"]}/clone-for-versioned'
                    run_out(['git', 'clone', '-q', '--no-checkout', url, gd])
                    os.mkdir(f'{d}/clone')
                    run_out(['git', f'--git-dir={gd}/.git', f'--work-tree={d}/clone', 'checkout', '-q', '-f'])
                else:
                    run_out(['git', 'clone', '-q', url, f'{d}/clone'])
                after(name)
            os.sync()
            t[name]['clone'] = timed(clone)
            seen[name]['clone_files'] = sum(len(f) for p, _, f in os.walk(f'{dirs[name]}/clone') if '/.git/' not in p + '/')
        log('agent: clone done')
        for name in TARGETS:
            def rm(d=dirs[name], name=name):
                run_out(['rm', '-rf', f'{d}/tree'])
                after(name)
            os.sync()
            t[name]['rm'] = timed(rm)
            seen[name]['tree_left_after_rm'] = os.path.exists(f'{dirs[name]}/tree')
        log('agent: rm done')
        rss = nasd.rss_mb()
        commits = int(sh('git', f'--git-dir={nasd.store("bench")}', 'rev-list', '--count', 'b').stdout)

    # ---- report
    nat, bind = t['native'], t['bindfs']
    ver, ws = t['nasd versioned'], t['nasd workspace']
    head = ['workload', *TARGETS, 'versioned / bindfs', 'workspace / native']
    print(f'\n## agent: real tools on a {src["entries"]:,}-entry source tree ({src["bytes"] / 2**20:.1f} MiB, '
          f'{src["tracked"]:,} files; a trimmed copy of node_modules)\n')
    print('Seconds per target; ratios are time over time (< 1: nasd faster). Versioned write workloads include '
          '`nas sync` (every change committed).\n')
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for key, label in AGENT_ROWS:
        cells = [f'{t[n][key]:.2f}' for n in TARGETS]
        print(f'| {label} | ' + ' | '.join(cells) + f' | {ver[key] / bind[key]:.2f}x | {ws[key] / nat[key]:.2f}x |')
    worst_v = max(AGENT_ROWS, key=lambda r: ver[r[0]] / bind[r[0]])
    worst_w = max(AGENT_ROWS, key=lambda r: ws[r[0]] / nat[r[0]])
    print(f'\nwarm find / native: versioned {ver["find_warm"] / nat["find_warm"]:.2f}x, '
          f'workspace {ws["find_warm"] / nat["find_warm"]:.2f}x')
    print(f'largest ratios: versioned {ver[worst_v[0]] / bind[worst_v[0]]:.2f}x bindfs ({worst_v[1]}), '
          f'workspace {ws[worst_w[0]] / nat[worst_w[0]]:.2f}x native ({worst_w[1]})')
    print('targets (issue "Real tools see a real filesystem"): workspace every workload <= 1.2x native; '
          'versioned every workload <= 1.0x bindfs; warm find <= 1.5x native')
    print(f'versioned git clone: the repository in workspace/, the checkout in the versioned folder '
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


def main():
    ap = argparse.ArgumentParser(description='Agent NAS benchmark (as root): prints tables of ratios, asserts nothing.')
    ap.add_argument('--only', choices=('micro', 'agent', 'metrics'),
                    help='run one section (default: micro and agent; metrics: the agent workload with /metrics on and off)')
    ap.add_argument('--rounds', type=int, default=3, help='metrics: rounds of the workload on each daemon')
    ap.add_argument('--scrape-every', type=float, default=1.0, help='metrics: seconds between scrapes while it runs')
    ap.add_argument('--files', type=int, default=10_000, help='micro: small files per target')
    ap.add_argument('--seq-mib', type=int, default=256, help='micro: size of the sequential file')
    ap.add_argument('--big-home', type=int, default=100_000, help='micro: files in the big Home')
    ap.add_argument('--agent-entries', type=int, default=6_000, help='agent: entries in the source tree')
    ap.add_argument('--root', default='/var/tmp/agent-nas-bench')
    ap.add_argument('--json')
    a = ap.parse_args()

    # SIGTERM (a timeout, kill) unwinds like Ctrl-C, so every mount and daemon is cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    unmount_below(a.root)
    shutil.rmtree(a.root, ignore_errors=True)
    os.makedirs(a.root)
    out = {}
    try:
        print(f'Agent NAS benchmark, {time.strftime("%Y-%m-%d")}, {os.cpu_count()} cores', flush=True)
        if a.only in (None, 'micro'):
            out.update(run_micro(a))
        if a.only in (None, 'agent'):
            out['agent'] = run_agent(a)
        if a.only == 'metrics':
            from metrics_cost import run_metrics_cost
            out['metrics'] = run_metrics_cost(a)
        if a.json:
            with open(a.json, 'w') as f:
                json.dump(out, f, indent=2)
    finally:
        unmount_below(a.root)
        shutil.rmtree(a.root, ignore_errors=True)


if __name__ == '__main__':
    main()
