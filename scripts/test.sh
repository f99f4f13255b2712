#!/usr/bin/env bash
# Set up whatever is missing, then run the whole test suite (unit and real-FUSE integration tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npx vitest run "$@"
