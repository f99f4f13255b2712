#!/usr/bin/env bash
# The benchmark: installs its peers (bindfs, fuse-overlayfs, fio) when missing, builds, and prints the table.
# Run as root on an idle machine: bench/run.sh [--only micro|agent|metrics] [--files N] [--seq-mib N] [--big-home N]
#   [--agent-entries N] [--json FILE]   (micro: small files, sequential I/O, git; agent: untar, find, grep, du,
#   git clone, rm -rf on a ~6,000-entry source tree)
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
