#!/usr/bin/env bash
# Compiles our FUSE binding (native/: N-API over libfuse 3's low-level API) into native/build/Release/nasfuse.node
# with npm's own node-gyp, against Debian's libfuse3-dev. npm's postinstall runs it; scripts/setup.sh runs it
# again whenever native/ changed. No prebuilt binary is downloaded.
# --sanitize: the same binding with AddressSanitizer and UndefinedBehaviorSanitizer (and NAS_CHECKED: a table bug
# aborts) into native/build-asan/nasfuse.node, beside the plain one; scripts/nasd-sanitized.sh runs nasd on it.
set -euo pipefail
cd "$(dirname "$0")/.."
log=/tmp/agent-nas-native-build.log
sanitize=false
[ "${1:-}" = --sanitize ] && sanitize=true && log=/tmp/agent-nas-native-build-asan.log

fail() { echo "build-native: $*" >&2; exit 1; }

# What node-gyp needs, named before it fails with a page of output.
missing=()
command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=("a C++ compiler (Debian: g++)")
command -v make >/dev/null || missing+=("make (Debian: make)")
command -v python3 >/dev/null || missing+=("python3 (Debian: python3)")
command -v pkg-config >/dev/null || missing+=("pkg-config (Debian: pkg-config)")
command -v pkg-config >/dev/null && ! pkg-config --exists fuse3 && missing+=("libfuse 3's headers (Debian: libfuse3-dev)")
# Node's headers: npm's nodedir setting, or the ones installed beside node (Debian's nodejs has /usr/include/node).
# Without them node-gyp downloads them from nodejs.org, which a machine with only package registries cannot reach.
nodedir=${npm_config_nodedir:-}
if [ -z "$nodedir" ]; then
  prefix=$(node -p 'require("path").resolve(process.execPath, "../..")')
  [ -f "$prefix/include/node/node_api.h" ] && nodedir=$prefix
fi
[ -z "$nodedir" ] || [ -f "$nodedir/include/node/node_api.h" ] || missing+=("Node's headers ($nodedir/include/node/node_api.h; Debian: the nodejs package installs them)")
if [ ${#missing[@]} -gt 0 ]; then
  list=$(printf '%s, ' "${missing[@]}")
  fail "cannot compile the FUSE binding: missing ${list%, } (scripts/setup.sh installs them)"
fi

# npm runs scripts with npm_config_node_gyp set to its own node-gyp; otherwise use the one npm ships.
gyp=${npm_config_node_gyp:-}
if [ -z "$gyp" ] || [ ! -f "$gyp" ]; then
  gyp=$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js
fi
[ -f "$gyp" ] || fail "node-gyp not found (looked for npm's own, $gyp): install npm 7 or newer"

args=(rebuild)
[ -n "$nodedir" ] && args+=("--nodedir=$nodedir")
# node-gyp builds in build/ of the folder it runs in: the sanitized build runs in a copy of the sources.
if $sanitize; then
  rm -rf native/build-asan && mkdir -p native/build-asan/src
  cp native/*.cc native/*.h native/binding.gyp native/build-asan/src/
  flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -DNAS_CHECKED"
  if ! (cd native/build-asan/src && CXXFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" node "$gyp" "${args[@]}") >"$log" 2>&1; then
    grep -E 'error|Error|ERR!' "$log" | head -20 >&2 || true
    fail "compiling the sanitized FUSE binding failed (full log: $log)"
  fi
  cp native/build-asan/src/build/Release/nasfuse.node native/build-asan/nasfuse.node
  # ASan's runtime must be the first library a process loads: preloaded, as scripts/nasd-sanitized.sh does.
  LD_PRELOAD=$(g++ -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
    node -e "require('./native/build-asan/nasfuse.node')" || fail "the sanitized binding does not load (build log: $log)"
  echo "build-native: built native/build-asan/nasfuse.node (AddressSanitizer, UndefinedBehaviorSanitizer)"
  exit 0
fi
if ! (cd native && node "$gyp" "${args[@]}") >"$log" 2>&1; then
  grep -E 'error|Error|ERR!' "$log" | head -20 >&2 || true
  fail "compiling the FUSE binding failed (full log: $log)"
fi
node -e "require('./native/build/Release/nasfuse.node')" 2>"$log.load" || {
  cat "$log.load" >&2
  grep -q 'libfuse3.so' "$log.load" && fail "the binding is built but libfuse 3 is missing at run time: apt-get install libfuse3-3"
  fail "the compiled binding does not load (see above; build log: $log)"
}
# What setup.sh compares to decide whether native/ changed since this build.
cat native/*.cc native/*.h native/binding.gyp | sha256sum | cut -d' ' -f1 > native/build/.sources
echo "build-native: built native/build/Release/nasfuse.node"
