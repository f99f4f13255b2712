#!/usr/bin/env bash
# A scripted CLI session against a fresh nasd of a checkout (default: this one, built), every answer printed
# with ids, hashes, times and sizes masked: run it before and after a reorganisation and diff the two.
# Usage: scripts/golden-cli.sh [checkout] > session.txt   (as root; needs /dev/fuse)
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}; dir=$(mktemp -d /tmp/nas-golden-XXXXXX); mnt=$dir/mnt
node "$root/dist/src/daemon/main.js" --state-dir $dir/state --mount $mnt --socket $dir/nasd.sock --demo --commit-window-ms 50 --web-listen 127.0.0.1:0 --log-level error > $dir/log 2>&1 &
pid=$!
for i in $(seq 100); do [ -S $dir/nasd.sock ] && mountpoint -q $mnt && break; sleep 0.1; done
sleep 0.5
export NAS_OWNER_TOKEN_FILE=$dir/state/owner.token
nas() { echo "\$ nas $*"; node "$root/dist/src/cli/main.js" --socket $dir/nasd.sock "$@" 2>&1; echo "exit=$?"; }
{
nas status; nas home list; nas branch create demo/g --ttl 48h; nas branch create demo/g
echo hello > $mnt/demo@g/outbox/g.md; mkdir $mnt/demo@g/outbox/d; echo x > $mnt/demo@g/outbox/d/x.md
nas sync demo/g; nas branch list demo; nas diff demo@g; nas --json diff demo@g
nas propose demo/g --into main --intent golden; nas pr list demo; nas pr show demo 1; nas pr approve demo 1; nas pr list demo
nas log demo; nas log demo --path outbox
rm $mnt/demo@g/outbox/g.md; nas sync demo/g; nas trash list demo; nas trash restore demo outbox/g.md --branch g; nas trash restore demo outbox/g.md --branch g
nas lease issue demo/g --principal nobody --ttl 2h | sed 's/[A-Za-z0-9_-]\{20,\}/TOKEN/'; nas lease list demo
nas memory check demo; nas context demo; nas checkpoint create demo@g safe; nas checkpoint list demo
nas maintenance run demo; nas branch extend demo/g --ttl 24h; nas branch discard demo/g; nas branch list demo
nas trash purge demo --older-than 1d; nas export demo $dir/out.bundle; nas remote list demo; nas run list demo
nas home create other; nas home archive other; nas home list; nas home unarchive other; nas --json status
} 2>&1 | sed -E "s#$dir#DIR#g; s/[0-9a-f]{40}/SHA/g; s/[0-9a-f]{7,12}\b/SHORT/g; s/[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+Z?/TIME/g; s/\"pid\": ?[0-9]+/\"pid\": PID/g; s/pid [0-9]+,/pid PID,/; s/[a-z0-9]{8}-[a-z0-9]{6}/TRASHID/g; s/[0-9.]+ KiB, /N KiB, /; s/ [0-9]+$/ N/; s/[0-9]+(\.[0-9]+)? ?ms\b/N ms/g; s/\"ms\":[0-9.]+/\"ms\":N/g; s/createdInMs\":[0-9.]+/createdInMs\":N/g; s/\b[0-9]+ ?(s|min|h) ago/AGO/g"
kill $pid; for i in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
fusermount -uz $mnt 2>/dev/null; rm -rf $dir
