#!/usr/bin/env bash
# The Debian root that test/systemd/ boots with systemd-nspawn: a minimal bookworm with systemd as init and what
# the units need at run time (fuse3, git, python3 for the broker, the libraries of nodegit and the FUSE binding).
# The project's checkout and Node are not installed here: the suite binds them read-only at /opt/agent-nas, the
# operator's path. Built once per machine under a lock, into a new directory moved into place when complete, and
# kept while the recipe (this script and the package list: their hash, the second argument) is unchanged.
#
# usage: build-root.sh ROOT RECIPE_HASH MIRROR PACKAGE,PACKAGE,...
set -euo pipefail
root=$1 want=$2 mirror=$3 packages=$4
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9
if [ -f "$root/.agent-nas-recipe" ] && [ "$(cat "$root/.agent-nas-recipe")" = "$want" ]; then exit 0; fi
log=$root.build.log
new=$root.new
rm -rf "$new"
echo "systemd suite: building the container root in $root (debootstrap from $mirror, about a minute)" >&2
if ! debootstrap --variant=minbase --include="$packages" bookworm "$new" "$mirror" >"$log" 2>&1; then
  echo "debootstrap bookworm from $mirror failed: $(grep -E '^(E|W):' "$log" | tail -1)" >&2
  rm -rf "$new"
  exit 1
fi
# What scripts/setup.sh does as root for a checkout at /opt/agent-nas (it cannot run in here: it builds).
chroot "$new" groupadd --system nas
ln -s /opt/agent-nas/bin/nas "$new/usr/local/bin/nas"
ln -s /opt/agent-nas/bin/nasd "$new/usr/local/bin/nasd"
# The bind mounts' targets (the checkout and Node): made here, since the booted root is a read-only lower layer.
mkdir -p "$new/opt/agent-nas"
touch "$new/usr/bin/node"
# No console to log in on; the boot is driven through nsenter.
chroot "$new" systemctl mask console-getty.service getty@tty1.service >/dev/null 2>&1
# etcd-server enables etcd.service as a one-member store on 127.0.0.1:2379: containers that share the host's
# network would all take that port. The cluster suite configures each member and starts it (README, "etcd").
chroot "$new" systemctl disable etcd.service >/dev/null 2>&1
echo "$want" >"$new/.agent-nas-recipe"
if [ -e "$root" ]; then mv "$root" "$root.old.$$" && rm -rf "$root.old.$$"; fi
mv "$new" "$root"
