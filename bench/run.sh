#!/usr/bin/env bash
# The benchmark: installs its peers (bindfs, fuse-overlayfs, fio) when missing, builds, and prints the tables, the
# last one the targets of issue 22 (each measure, nasd and its peer, the ratio, the target, met or not).
# Run as root: bench/run.sh [--only micro,memory,agent,restart,history|metrics] [--reps N] [--files N] [--seq-mib N] [--big-home N]
#   [--agent-entries N] [--branches N] [--restart-cycles N] [--deep-commits N] [--deep-files N] [--json FILE]
#   (micro: small files, sequential I/O, git; memory: branch creation, RSS with a 100,000-file Home; agent: untar,
#   find, grep, du, git clone, rm -rf on a ~6,000-entry source tree; restart: a restart keeping the kernel
#   connection with 20 branches; history: a Home adopted from a 50,000-commit repository, its first find and memory).
#   Workloads run --reps times (default 5), targets interleaved; ratios are medians.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (it mounts filesystems and drops caches)" >&2; exit 1; }
missing=()
for p in bindfs fuse-overlayfs fio python3; do command -v "$p" >/dev/null || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
fi
bash scripts/setup.sh >/dev/null
exec python3 bench/bench.py "$@"
