#!/usr/bin/env bash
# Compiles node_modules/fuse-native from its source, as patched by patches/fuse-native+2.2.6.patch (npm's
# postinstall applies the patch with patch-package, then runs this). The result, build/Release/fuse.node, is
# what require('fuse-native') loads: node-gyp-build prefers build/Release over the prebuilt prebuilds/, and
# the patched index.js refuses any binding not built from the patched source.
# Needs a C compiler, make, python3 and Node's headers; libfuse's headers come with fuse-shared-library.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=node_modules/fuse-native
log=/tmp/agent-nas-fuse-native-build.log

fail() { echo "build-fuse-native: $*" >&2; exit 1; }

[ -d "$dir" ] || fail "$dir is missing: run npm ci first"
grep -q 'agent-nas patch' "$dir/index.js" || fail "$dir is not patched: run npx patch-package (patches/fuse-native+2.2.6.patch)"

# What node-gyp needs, named before it fails with a page of output.
missing=()
command -v cc >/dev/null || command -v gcc >/dev/null || missing+=("a C compiler (Debian: gcc)")
command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=("a C++ compiler for linking (Debian: g++)")
command -v make >/dev/null || missing+=("make (Debian: make)")
command -v python3 >/dev/null || missing+=("python3 (Debian: python3)")
# Node's headers: npm's nodedir setting, or the ones installed beside node (Debian's nodejs has /usr/include/node).
# Without them node-gyp downloads them from nodejs.org, which a machine with only package registries cannot reach.
nodedir=${npm_config_nodedir:-}
if [ -z "$nodedir" ]; then
  prefix=$(node -p 'require("path").resolve(process.execPath, "../..")')
  [ -f "$prefix/include/node/node_api.h" ] && nodedir=$prefix
fi
if [ -n "$nodedir" ]; then
  [ -f "$nodedir/include/node/node_api.h" ] || missing+=("Node's headers ($nodedir/include/node/node_api.h; Debian: the nodejs package installs them)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  list=$(printf '%s, ' "${missing[@]}")
  fail "cannot compile fuse-native: missing ${list%, }"
fi

# npm runs scripts with npm_config_node_gyp set to its own node-gyp; otherwise use the one npm ships.
gyp=${npm_config_node_gyp:-}
if [ -z "$gyp" ] || [ ! -f "$gyp" ]; then
  npm_root=$(dirname "$(readlink -f "$(command -v npm)")")/..
  gyp=$npm_root/node_modules/node-gyp/bin/node-gyp.js
fi
[ -f "$gyp" ] || fail "node-gyp not found (looked for npm's own, $gyp): install npm 7 or newer"

args=(rebuild)
[ -n "$nodedir" ] && args+=("--nodedir=$nodedir")
if ! (cd "$dir" && node "$gyp" "${args[@]}") >"$log" 2>&1; then
  grep -E 'error|Error|ERR!' "$log" | head -20 >&2 || true
  if grep -q 'fuse.h: No such file' "$log"; then
    fail "compiling fuse-native failed: libfuse's headers are missing (they come with the npm package fuse-shared-library-linux; run npm ci again). Full log: $log"
  fi
  fail "compiling fuse-native failed (full log: $log)"
fi

# Check that what loads is the patched build, not the prebuilt binary.
node -e "
  const Fuse = require('fuse-native');
  const where = require('node-gyp-build').path('$dir');
  if (!where.includes('build/Release')) throw new Error('fuse-native loads ' + where + ', not build/Release');
  if (typeof Fuse.prototype.context !== 'function') throw new Error('fuse-native has no context(): not patched');
" 2>"$log.load" || {
  cat "$log.load" >&2
  grep -q 'libfuse.so.2' "$log.load" && fail "fuse-native is built but libfuse 2 is missing at run time: apt-get install libfuse2"
  fail "the compiled fuse-native does not load as the patched build (see above; build log: $log)"
}
echo "build-fuse-native: built $dir/build/Release/fuse.node from the patched source"
