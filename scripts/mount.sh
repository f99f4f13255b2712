#!/usr/bin/env bash
# Start nasd by hand: set up what is missing, start the daemon in the background (log in
# /var/log/agent-nas/nasd.log), and wait until its mount and control socket answer.
#   scripts/mount.sh [--demo] [nasd flags...]   start (see nasd --help for the flags)
#   scripts/mount.sh --stop                     commit pending changes, unmount, stop
#   scripts/mount.sh --foreground [flags...]    run in the foreground (as systemd does)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "mount.sh: run as root (FUSE mounts with allow_other, state in /var/lib)" >&2; exit 1; }

pidfile=/run/agent-nas/nasd.pid
if [ "${1:-}" = "--stop" ]; then
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill -TERM "$(cat "$pidfile")"
    for _ in $(seq 100); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
    echo "nasd stopped"
  else
    echo "nasd is not running"
  fi
  exit 0
fi

bash scripts/setup.sh

if [ "${1:-}" = "--foreground" ]; then shift; exec bin/nasd "$@"; fi

if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  echo "nasd is already running (pid $(cat "$pidfile")); stop it with: scripts/mount.sh --stop"
  exit 0
fi
mkdir -p /run/agent-nas
mkdir -p -m 0750 /var/log/agent-nas
log=/var/log/agent-nas/nasd.log
# The log names Homes, branches, principals and paths: root's and its group's only.
touch "$log" && chmod 0640 "$log"
setsid bin/nasd "$@" >>"$log" 2>&1 < /dev/null &
echo $! > "$pidfile"
for _ in $(seq 150); do
  if bin/nas status >/dev/null 2>&1; then
    echo "nasd is running (pid $(cat "$pidfile"), log $log)"
    bin/nas status
    echo "try: ls /agents; cat /agents/demo/AGENTS.md; nas branch create demo/draft --ttl 48h"
    echo "review PRs in a browser: nas web open (prints a one-time login link)"
    exit 0
  fi
  kill -0 "$(cat "$pidfile")" 2>/dev/null || { echo "nasd exited:" >&2; tail -5 "$log" >&2; exit 1; }
  sleep 0.2
done
echo "nasd did not answer within 30 s; see $log" >&2
exit 1
