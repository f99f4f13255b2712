"""What Prometheus metrics cost nasd (issue 24): the agent workload on three daemons in one run, one serving
/metrics (scraped every --scrape-every seconds while it works, more often than Prometheus's usual 15 s) and two
with metrics off (the second, an identical control, shows the noise of the machine: any difference between the
two off daemons is not metrics'), rotated round by round so all see the same machine. Prints the median seconds
of each step and the differences; the target is under 3%.

Steps, in a branch's versioned folder (commits included: each write step ends with `nas sync`) and with warm
caches (no drop_caches: the machine is shared; the kernel's cache still sends FUSE every open, read and write):
untar, find, grep -r, du -s, 1,000 small files written one by one, rm -rf.
"""
import contextlib
import os
import statistics
import threading
import urllib.request

from bench import Nasd, build_agent_inputs, log, run_out, timed, GREP_FOR

STEPS = ('untar', 'find', 'grep', 'du', 'small_files', 'rm')


def scraper(url, every, stop, seen):
    while not stop.wait(every):
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                seen['bytes'] = len(r.read())
                seen['scrapes'] += 1
        except OSError as e:
            seen['errors'] += 1
            seen['last_error'] = str(e)


def workload(nasd, src, rnd):
    d = f'{nasd.mnt}/bench@b/outbox/r{rnd}'
    os.makedirs(d)
    sync = lambda: nasd.nas('sync', 'bench/b')
    t = {}

    def untar():
        run_out(['tar', '-xf', src['tar'], '--no-same-owner', '-C', d])
        sync()

    def small():
        os.makedirs(f'{d}/small')
        for i in range(1000):
            with open(f'{d}/small/f{i}.md', 'w') as f:
                f.write(f'note {i}\n')
        sync()

    def rm():
        run_out(['rm', '-rf', f'{d}/tree', f'{d}/small'])
        sync()

    t['untar'] = timed(untar)
    t['find'] = timed(lambda: run_out(['find', f'{d}/tree']))
    t['grep'] = timed(lambda: run_out(['grep', '-r', '-F', GREP_FOR, f'{d}/tree'], ok=(0, 1)))
    t['du'] = timed(lambda: run_out(['du', '-s', f'{d}/tree']))
    t['small_files'] = timed(small)
    t['rm'] = timed(rm)
    return t


def run_metrics_cost(a):
    root = f'{a.root}/metrics'
    src = build_agent_inputs(root, a.agent_entries)
    log(f'metrics: source tree of {src["entries"]:,} entries, {src["bytes"] / 2**20:.1f} MiB; {a.rounds} rounds')
    runs = {'off': [], 'on': [], 'off2': []}
    seen = {'scrapes': 0, 'errors': 0, 'bytes': 0}
    with contextlib.ExitStack() as cleanup:
        daemons = {
            'off': Nasd(f'{root}/off'),
            'on': Nasd(f'{root}/on', extra=('--metrics-listen', '127.0.0.1:0')),
            'off2': Nasd(f'{root}/off2'),
        }
        for n in daemons.values():
            cleanup.callback(n.stop)
            n.nas('home', 'create', 'bench')
            n.nas('branch', 'create', 'bench/b')
        url = daemons['on'].nas('status')['metrics']
        stop = threading.Event()
        thread = threading.Thread(target=scraper, args=(url, a.scrape_every, stop, seen), daemon=True)
        thread.start()
        cleanup.callback(thread.join)
        cleanup.callback(stop.set)
        for rnd in range(a.rounds):
            # Rotate which goes first, so a drift of the machine's load falls on all.
            names = ('off', 'on', 'off2')
            order = names[rnd % 3:] + names[:rnd % 3]
            for which in order:
                runs[which].append(workload(daemons[which], src, rnd))
            log(f'metrics: round {rnd + 1} of {a.rounds} done')
        rss = {k: n.rss_mb() for k, n in daemons.items()}

    med = {k: {s: statistics.median(r[s] for r in v) for s in STEPS} for k, v in runs.items()}
    total = {k: sum(med[k].values()) for k in med}
    print(f'\n## metrics: the agent workload with /metrics on and off ({src["entries"]:,}-entry tree, '
          f'{a.rounds} rounds, interleaved; median seconds)\n')
    pct = lambda a, b: 100 * (a / b - 1)
    print('| step | off | on | off (control) | on / off | control / off |')
    print('|---|---|---|---|---|---|')
    for s in STEPS:
        o, n, c = med['off'][s], med['on'][s], med['off2'][s]
        print(f'| {s} | {o:.3f} | {n:.3f} | {c:.3f} | {pct(n, o):+.1f}% | {pct(c, o):+.1f}% |')
    off_both = (total['off'] + total['off2']) / 2
    diff = pct(total['on'], off_both)
    print(f'| **total** | {total["off"]:.3f} | {total["on"]:.3f} | {total["off2"]:.3f} | {pct(total["on"], total["off"]):+.1f}% '
          f'| {pct(total["off2"], total["off"]):+.1f}% |')
    print(f'\non against the mean of both off daemons: **{diff:+.1f}%** (target: under 3%); the control against off: '
          f'{pct(total["off2"], total["off"]):+.1f}% (the noise floor of this run).')
    print('per round, total seconds: ' + '; '.join(f'{k} ' + ' '.join(f'{sum(r.values()):.1f}' for r in v) for k, v in runs.items()))
    print(f'Scrapes while it ran: {seen["scrapes"]} (every {a.scrape_every:g} s, {seen["bytes"] / 1024:.0f} KiB each), '
          f'errors: {seen["errors"]}. RSS after: ' + ', '.join(f'{k} {v:.0f} MB' for k, v in rss.items()) + '.')
    return {'median_seconds': med, 'total': total, 'difference_percent': diff, 'runs': runs, 'scrapes': seen, 'rss_mb': rss}
