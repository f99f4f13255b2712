#!/usr/bin/env bash
# nasd on the sanitized FUSE binding (built by scripts/build-native.sh --sanitize into native/build-asan/): ASan's
# runtime preloaded (it must be the first library loaded), leaks not reported (Node's own at exit are not ours to
# fix), and any other report ends nasd with it on stderr (halt_on_error, abort_on_error). Arguments are nasd's; it
# becomes nasd (exec: the pid stays). NASD_ADDON is the binding src/util/addon.ts loads instead of
# native/build/Release/nasfuse.node.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
addon=$root/native/build-asan/nasfuse.node
[ -f "$addon" ] || { echo "nasd-sanitized: $addon is missing: run scripts/build-native.sh --sanitize" >&2; exit 1; }
asan=$(g++ -print-file-name=libasan.so)
[ -f "$asan" ] || { echo "nasd-sanitized: ASan's runtime is missing (Debian: libasan8, with g++)" >&2; exit 1; }
export LD_PRELOAD="$asan${LD_PRELOAD:+:$LD_PRELOAD}"
# alloc_dealloc_mismatch=0: nodegit (not instrumented, not ours) frees with free() what it made with new
# (GitTreeUpdate's destructor); ASan would stop nasd at the first tree it writes. verify_asan_link_order=0: a
# reload's next nasd has the HUP guard preloaded before ASan's runtime (src/daemon/handover.ts), both still preloaded.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:alloc_dealloc_mismatch=0:verify_asan_link_order=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
export NASD_ADDON=$addon
exec node "$root/dist/src/daemon/main.js" "$@"
