#!/usr/bin/env bash
# Installs whatever Agent NAS is missing on a Debian machine (system packages, npm packages), builds it,
# and puts `nas` and `nasd` on the PATH. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

fail() { echo "setup: $*" >&2; exit 1; }

# fuse3 provides fusermount (and is what bindfs and fuse-overlayfs need); fuse-native links libfuse.so.2.
# nodegit 0.27 builds from source: it needs a compiler, python3, and the Kerberos and OpenSSL headers.
# fuse-native is compiled from source too, with our patch (patches/, scripts/build-fuse-native.sh): a compiler,
# make, python3 and Node's headers (libfuse's headers come with the npm package fuse-shared-library-linux).
# rsync is used by the test suite (real tools in branch views).
packages=(fuse3 libfuse2 git ca-certificates python3 make g++ pkg-config libkrb5-dev libssl-dev rsync)
# The test suite also drives the web page in a real browser: Debian's chromium (scripts/test.sh asks for it), and
# runs the systemd units in a Debian container booted with systemd-nspawn (test/systemd/; debootstrap builds its root
# once, from Debian's archive, under /var/cache/agent-nas-test).
if [ "${AGENT_NAS_TESTS:-}" = 1 ]; then packages+=(chromium debootstrap systemd-container); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || fail "missing Debian packages (${missing[*]}); run this script as root, or: sudo apt-get install ${missing[*]}"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || fail "apt-get update failed: check the network and /etc/apt/sources.list"
  apt-get install -y -q "${missing[@]}" >/dev/null || fail "apt-get install ${missing[*]} failed (see the output above)"
fi

command -v node >/dev/null || fail "Node.js is not installed: install Node.js 20 or newer (https://nodejs.org or your distribution)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || fail "Node.js $(node -v) is too old: Agent NAS needs Node.js 20 or newer"

# npm packages: reinstall only when the lockfile or a patch of a package changed since the last successful
# install. npm ci's postinstall applies patches/ (patch-package) and compiles the patched fuse-native.
stamp=node_modules/.agent-nas-setup
want=$(cat package-lock.json patches/*.patch | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing npm packages (nodegit builds from source: about 6-9 minutes on 2 cores)"
  if ! npm ci --no-audit --no-fund >/tmp/agent-nas-npm.log 2>&1; then
    tail -40 /tmp/agent-nas-npm.log >&2
    # The fuse-native build names what it is missing in its own lines: repeat them last, where they are seen.
    why=$(grep -E '^(build-fuse-native|\*\*ERROR\*\* Failed to apply patch)' /tmp/agent-nas-npm.log || true)
    [ -z "$why" ] || fail "$why"
    fail "npm ci failed; full log in /tmp/agent-nas-npm.log"
  fi
  node -e "require('nodegit'); require('fuse-native')" || fail "nodegit or fuse-native does not load after npm ci; see /tmp/agent-nas-npm.log"
  echo "$want" > "$stamp"
fi

npm run -s build || fail "TypeScript build failed"

if [ "$(id -u)" -eq 0 ]; then
  # The systemd unit gives this group the control socket: its members' runs propose with their leases.
  getent group nas >/dev/null || groupadd --system nas
  ln -sf "$repo/bin/nas" /usr/local/bin/nas
  ln -sf "$repo/bin/nasd" /usr/local/bin/nasd
fi
echo "setup: ready"
