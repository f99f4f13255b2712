#!/usr/bin/env bash
# Builds the binding's C++ unit tests (native/test/*_test.cc over table.cc, cache.cc, pidns.cc, handover.cc's table bytes: no N-API, no
# mount) and runs them twice: as the addon is built (-O2), and with AddressSanitizer and UndefinedBehaviorSanitizer
# in a checked build (NAS_CHECKED: a table bug aborts). Any failed check or sanitizer report fails the script.
# Outputs: native/build-test/{plain,sanitized}/unit-tests. test/unit/native-table.test.ts runs this.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
native=$(dirname "$here")
out=$native/build-test

fail() { echo "native tests: $*" >&2; exit 1; }
command -v g++ >/dev/null || fail "g++ is missing (Debian: g++)"
pkg-config --exists fuse3 || fail "libfuse 3's headers are missing (Debian: libfuse3-dev)"
# nasfuse.h names N-API's types (the mount's threadsafe functions): Node's headers, nothing of N-API is linked.
prefix=$(node -p 'require("path").resolve(process.execPath, "../..")')
nodeinc=${npm_config_nodedir:-$prefix}/include/node
[ -f "$nodeinc/node_api.h" ] || fail "Node's headers are missing ($nodeinc/node_api.h)"

sources=("$here"/main.cc "$here"/*_test.cc "$native"/table.cc "$native"/cache.cc "$native"/pidns.cc "$native"/handover.cc)
common=(-std=c++17 -Werror -Wall -Wextra -I"$nodeinc" $(pkg-config --cflags fuse3) -DNAPI_VERSION=8)
libs=($(pkg-config --libs fuse3) -lpthread)

build() {  # name, flags...
  local dir=$out/$1
  shift
  mkdir -p "$dir"
  g++ "${common[@]}" "$@" -o "$dir/unit-tests" "${sources[@]}" "${libs[@]}"
}

run() {  # name
  echo "== $1"
  local log=$out/$1/output
  # A sanitizer report ends the run with an error (halt_on_error), and is also looked for in what it printed.
  if ! UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
    "$out/$1/unit-tests" >"$log" 2>&1; then
    cat "$log"
    fail "$1: failed"
  fi
  cat "$log"
  if grep -qE 'runtime error|ERROR: (Address|Leak)Sanitizer' "$log"; then fail "$1: a sanitizer report"; fi
}

build plain -O2
build sanitized -O1 -g -DNAS_CHECKED -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
run plain
run sanitized
echo "native tests: passed (plain and sanitized)"
