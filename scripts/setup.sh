#!/usr/bin/env bash
# Installs whatever Agent NAS is missing on a Debian machine (system packages, npm packages), builds it,
# and puts `nas` and `nasd` on the PATH. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

fail() { echo "setup: $*" >&2; exit 1; }

# fuse3 provides fusermount3 (and is what bindfs and fuse-overlayfs need); our FUSE binding (native/) is
# compiled against libfuse3-dev (scripts/build-native.sh): a C++ compiler, make, python3, pkg-config and Node's
# headers. nodegit 0.27 builds from source: it needs a compiler, python3, and the Kerberos and OpenSSL headers.
# rsync is used by the test suite (real tools in branch views).
packages=(fuse3 libfuse3-dev git ca-certificates python3 make g++ pkg-config libkrb5-dev libssl-dev rsync)
# The test suite also drives the web page in a real browser: Debian's chromium (scripts/test.sh asks for it); the
# SMB share through a private smbd on loopback with smbclient (samba, smbclient); and runs the systemd units in a
# Debian container booted with systemd-nspawn (test/systemd/; debootstrap builds its root once, from Debian's
# archive, under /var/cache/agent-nas-test); getfacl (acl) reads the ACLs a branch shows.
# The test suite runs every benchmark once at its smallest sizes (test/bench/): their peers bindfs, fuse-overlayfs, fio.
# The cluster suite (test/cluster/) runs real etcd members (etcd-server, etcd-client for etcdctl), cuts hosts apart
# with nft (nftables) and shifts a host's clock with faketime.
if [ "${AGENT_NAS_TESTS:-}" = 1 ]; then packages+=(chromium samba smbclient debootstrap systemd-container acl bindfs fuse-overlayfs fio etcd-server etcd-client nftables faketime); fi
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

# npm packages: reinstall only when the lockfile changed since the last successful install. npm ci's
# postinstall compiles our FUSE binding.
stamp=node_modules/.agent-nas-setup
want=$(sha256sum < package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing npm packages (nodegit builds from source: about 6-9 minutes on 2 cores)"
  if ! npm ci --no-audit --no-fund >/tmp/agent-nas-npm.log 2>&1; then
    tail -40 /tmp/agent-nas-npm.log >&2
    # The binding's build names what it is missing in its own lines: repeat them last, where they are seen.
    why=$(grep -E '^build-native' /tmp/agent-nas-npm.log || true)
    [ -z "$why" ] || fail "$why"
    fail "npm ci failed; full log in /tmp/agent-nas-npm.log"
  fi
  node -e "require('nodegit')" || fail "nodegit does not load after npm ci; see /tmp/agent-nas-npm.log"
  echo "$want" > "$stamp"
fi

# The FUSE binding again whenever native/ changed since it was built (a pull, an edit).
sources=$(cat native/*.cc native/*.h native/binding.gyp | sha256sum | cut -d' ' -f1)
if [ "$(cat native/build/.sources 2>/dev/null)" != "$sources" ]; then
  bash scripts/build-native.sh
fi

npm run -s build || fail "TypeScript build failed"

if [ "$(id -u)" -eq 0 ]; then
  # The systemd unit gives this group the control socket: its members' runs propose with their leases.
  getent group nas >/dev/null || groupadd --system nas
  ln -sf "$repo/bin/nas" /usr/local/bin/nas
  ln -sf "$repo/bin/nasd" /usr/local/bin/nasd
fi
echo "setup: ready"
