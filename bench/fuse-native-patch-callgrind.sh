#!/usr/bin/env bash
# Instructions per FUSE request in a do-nothing fuse-native filesystem (getattr of the mount root, answered
# from memory; attr_timeout=0), counted by callgrind in the filesystem's process, all threads, user space.
# Unlike time, the count does not move with other load on the machine, so small costs show.
# usage (root): bench/fuse-native-patch-callgrind.sh <fuse-native folder> [plain|context]
#   context: the getattr handler calls fuse.context() (the patched build only).
#   An unpatched folder to compare with: npm pack fuse-native@2.2.6, untar it, and in it
#   NODE_PATH=$PWD/node_modules node <npm's node-gyp.js> rebuild --nodedir=/usr (bench/fuse-native-patch.mjs does this).
# Prints the count for 4 intervals of 5000 stats after 10000 to warm up; an interval with a garbage
# collection or a JIT compilation in it reads some 8000 higher.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(readlink -f "$1")
mode=${2:-plain}
w=$(mktemp -d /tmp/nas-bench-cg-XXXXXX)
mkdir "$w/mnt"
NODE_PATH=$PWD/node_modules valgrind --tool=callgrind --callgrind-out-file="$w/cg.%p" --smc-check=all-non-file \
  node bench/fuse-native-patch.mjs --serve "$dir" "$w/mnt" "$mode" >"$w/serve.out" 2>"$w/serve.err" &
vpid=$!
trap 'kill $vpid 2>/dev/null; wait $vpid 2>/dev/null; grep -q " $w/mnt " /proc/mounts && fusermount -uz "$w/mnt"; rm -rf "$w"' EXIT
for _ in $(seq 1 180); do grep -q mounted "$w/serve.out" && break; sleep 1; done
grep -q mounted "$w/serve.out" || { cat "$w/serve.err" >&2; exit 1; }
stats() { python3 -c "import os,sys
for _ in range(int(sys.argv[2])): os.stat(sys.argv[1])" "$w/mnt" "$1"; }
stats 10000
for _ in 1 2 3 4; do
  callgrind_control -z $vpid >/dev/null 2>&1
  stats 5000
  callgrind_control -d $vpid >/dev/null 2>&1
done
for f in "$w"/cg.$vpid.*; do
  echo "$(awk '/^totals:/ { printf "%.0f", $2 / 5000 }' "$f") instructions per request"
done
