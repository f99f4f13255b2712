#!/usr/bin/env bash
# Set up whatever is missing, then run the whole test suite (unit and real-FUSE integration tests).
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT_NAS_TESTS=1 bash scripts/setup.sh
# The tests are type-checked too (vitest itself only strips types).
npx tsc -p tsconfig.test.json || { echo 'test: the tests do not type-check (see above)' >&2; exit 1; }
npx vitest run "$@"
# The whole suite (no files named): the binding once more, built with AddressSanitizer and UndefinedBehaviorSanitizer,
# serving the POSIX suite (a report ends that nasd, which fails the cases).
if [ $# -eq 0 ]; then
  bash scripts/build-native.sh --sanitize
  NAS_TEST_SANITIZED=1 npx vitest run test/posix/posix.test.ts
fi
