#!/usr/bin/env python3
"""SMB throughput of the Agent NAS share against the same share definition over a plain directory.

One run, one private smbd on loopback (its own port, private/lock/state/cache/pid directories under the bench
root, stopped by its pid), two shares from the same definition (`nas share smb --print`): [agents] on a nasd
mount and [plain] on a directory of the same disk. smbclient logs in as a Unix account made for the run (removed
after), which writes in a branch under a write lease, as a person would. Targets:

  plain       the [plain] share: a directory on the disk that holds nasd's state
  versioned   [agents], a branch view's outbox/ (every close is a commit; the commit itself is timed apart)
  workspace   [agents], the same branch's workspace/ (scratch: a bind mount, no FUSE hop)

Workloads, each one smbclient session, median of --repeat runs: put and get of a 256 MiB file, put, get and
del of 1,000 files of 4 KiB. Caches are dropped before each get. Not a test: it prints numbers, asserts nothing.

usage: python3 bench/smb.py [--big-mib 256] [--files 1000] [--repeat 3] [--root /var/tmp/agent-nas-bench-smb]
(as root, after `npm run build`; needs samba and smbclient: apt-get install samba smbclient)
"""
import argparse
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import REPO, NODE, Nasd, drop_caches, log, unmount_below  # noqa: E402

PASS = 'bench-Smb-1'


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def global_conf(d, port):
    return f"""[global]
  server role = standalone server
  smb ports = {port}
  interfaces = 127.0.0.1
  bind interfaces only = yes
  private dir = {d}/private
  lock directory = {d}/lock
  state directory = {d}/state
  cache directory = {d}/cache
  pid directory = {d}/pid
  ncalrpc dir = {d}/ncalrpc
  passdb backend = tdbsam:{d}/private/passdb.tdb
  log file = {d}/log.%m
  log level = 0
  map to guest = never
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  rpc start on demand helpers = no
"""


class Smbd:
    """smbd in a session of its own: told to stop, smbd signals its whole process group."""

    def __init__(self, conf, port, logfile):
        self.conf, self.port = conf, port
        self.log = open(logfile, 'w')
        self.proc = subprocess.Popen(['smbd', '--foreground', '--no-process-group', '--debug-stdout', '-s', conf],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        for _ in range(300):
            if self.proc.poll() is not None:
                break
            with socket.socket() as s:
                if s.connect_ex(('127.0.0.1', port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f'smbd did not start; see {logfile}')

    def client(self, share, user, cmds):
        p = subprocess.run(['smbclient', f'//127.0.0.1/{share}', '-p', str(self.port), '-s', self.conf,
                            '-U', f'{user}%{PASS}', '-c', cmds], capture_output=True, text=True)
        if p.returncode != 0 or 'NT_STATUS_' in p.stdout + p.stderr:
            raise RuntimeError(f'smbclient //{share} -c {cmds!r}: {p.stdout}{p.stderr}')

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run(a):
    root = a.root
    user = f'nasbench{os.getpid()}'[:31]
    subprocess.run(['useradd', '--no-create-home', '--shell', '/usr/sbin/nologin', '--user-group', user], check=True)
    smbd = nasd = None
    try:
        uid = pwd.getpwnam(user).pw_uid
        nasd = Nasd(f'{root}/nasd')
        os.chmod(root, 0o755)
        nasd.nas('home', 'create', 'bench')
        nasd.nas('branch', 'create', 'bench/smb', '--ttl', '4h')
        nasd.nas('lease', 'issue', 'bench/smb', '--principal', user, '--ttl', '4h')
        plain = f'{root}/plain'
        os.makedirs(f'{plain}/outbox')
        for p in (plain, f'{plain}/outbox'):
            os.chown(p, uid, uid)
        sd = f'{root}/samba'
        for sub in ('private', 'lock', 'state', 'cache', 'pid', 'ncalrpc'):
            os.makedirs(f'{sd}/{sub}')
        env = {**os.environ, 'NAS_OWNER_TOKEN_FILE': f'{nasd.state}/owner.token'}
        share = subprocess.run([NODE, f'{REPO}/dist/src/cli/main.js', '--socket', nasd.sock, 'share', 'smb', '--print'],
                               check=True, capture_output=True, text=True, env=env).stdout
        plain_share = share.replace('[agents]', '[plain]', 1).replace(f'path = {nasd.mnt}', f'path = {plain}', 1)
        port = free_port()
        conf = f'{sd}/smb.conf'
        with open(conf, 'w') as f:
            f.write(global_conf(sd, port) + '\n' + share + '\n' + plain_share)
        subprocess.run(['smbpasswd', '-c', conf, '-s', '-a', user], input=f'{PASS}\n{PASS}\n', text=True, check=True,
                       capture_output=True)
        smbd = Smbd(conf, port, f'{sd}/smbd.out')

        local = f'{root}/local'
        os.makedirs(f'{local}/small')
        with open(f'{local}/big.bin', 'wb') as f:
            for _ in range(a.big_mib):
                f.write(os.urandom(1 << 20))
        block = os.urandom(4096)
        for i in range(a.files):
            with open(f'{local}/small/f{i:05d}.txt', 'wb') as f:
                f.write(block)

        # (share, folder in it, after a write: commit what is pending so it does not overlap the next step)
        sync = lambda: nasd.nas('sync', 'bench/smb')  # noqa: E731
        targets = {
            'plain': ('plain', 'outbox', lambda: None),
            'versioned': ('agents', 'bench@smb\\outbox', sync),
            'workspace': ('agents', 'bench@smb\\workspace', sync),
        }
        results = {t: {} for t in targets}
        commit_big = []
        for r in range(a.repeat):
            for t, (sh, folder, after) in targets.items():
                log(f'round {r + 1}/{a.repeat}: {t}')
                res = results[t]
                big = f'{folder}\\big{r}.bin'
                res.setdefault('put big', []).append(timed(lambda: smbd.client(sh, user, f'put {local}/big.bin {big}')))
                c = timed(after)
                if t == 'versioned':
                    commit_big.append(c)
                drop_caches()
                res.setdefault('get big', []).append(timed(lambda: smbd.client(sh, user, f'get {big} {local}/big.back')))
                os.unlink(f'{local}/big.back')
                smbd.client(sh, user, f'del {big}')
                after()
                d = f'{folder}\\small{r}'
                smbd.client(sh, user, f'mkdir {d}')
                res.setdefault('put files', []).append(timed(lambda: smbd.client(
                    sh, user, f'prompt off; lcd {local}/small; cd {d}; mput *')))
                after()
                drop_caches()
                os.makedirs(f'{local}/back')
                res.setdefault('get files', []).append(timed(lambda: smbd.client(
                    sh, user, f'prompt off; lcd {local}/back; cd {d}; mget *')))
                got = len(os.listdir(f'{local}/back'))
                if got != a.files:
                    raise RuntimeError(f'{t}: got {got} files back, not {a.files}')
                shutil.rmtree(f'{local}/back')
                res.setdefault('del files', []).append(timed(lambda: smbd.client(sh, user, f'cd {d}; del *')))
                after()
        return results, commit_big
    finally:
        if smbd:
            smbd.stop()
        if nasd:
            nasd.stop()
        subprocess.run(['userdel', user], capture_output=True)


def report(a, results, commit_big):
    mib = a.big_mib
    rows = [
        ('put big', f'put {mib} MiB', lambda s: f'{mib / s:7.1f} MiB/s'),
        ('get big', f'get {mib} MiB (cold)', lambda s: f'{mib / s:7.1f} MiB/s'),
        ('put files', f'put {a.files:,} x 4 KiB', lambda s: f'{a.files / s:7.0f} files/s'),
        ('get files', f'get {a.files:,} x 4 KiB (cold)', lambda s: f'{a.files / s:7.0f} files/s'),
        ('del files', f'del {a.files:,} files', lambda s: f'{a.files / s:7.0f} files/s'),
    ]
    print(f'SMB share throughput, {time.strftime("%Y-%m-%d")}, {os.cpu_count()} cores, smbclient over loopback, '
          f'median of {a.repeat}')
    print('ratio = plain time / target time (1.00 = as fast as the plain directory)\n')
    head = f'{"workload":<26} {"plain":>16} {"nasd versioned":>16} {"ratio":>6} {"nasd workspace":>16} {"ratio":>6}'
    print(head)
    print('-' * len(head))
    for key, name, rate in rows:
        med = {t: statistics.median(results[t][key]) for t in results}
        print(f'{name:<26} {rate(med["plain"]):>16} {rate(med["versioned"]):>16} {med["plain"] / med["versioned"]:6.2f}'
              f' {rate(med["workspace"]):>16} {med["plain"] / med["workspace"]:6.2f}')
    print(f'\nversioned: the {mib} MiB put is committed {statistics.median(commit_big):.1f} s after smbclient returns '
          f'(nas sync; hashing and compressing it into git)')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--big-mib', type=int, default=256)
    ap.add_argument('--files', type=int, default=1000)
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--root', default='/var/tmp/agent-nas-bench-smb')
    a = ap.parse_args()
    if os.getuid() != 0:
        sys.exit('bench/smb.py: run as root (it mounts, adds an account and drops caches)')
    for tool in ('smbd', 'smbclient', 'smbpasswd'):
        if not shutil.which(tool):
            sys.exit(f'bench/smb.py: {tool} is missing: apt-get install samba smbclient')
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    unmount_below(a.root)
    shutil.rmtree(a.root, ignore_errors=True)
    os.makedirs(a.root)
    try:
        results, commit_big = run(a)
        report(a, results, commit_big)
    finally:
        unmount_below(a.root)
        shutil.rmtree(a.root, ignore_errors=True)


if __name__ == '__main__':
    main()
