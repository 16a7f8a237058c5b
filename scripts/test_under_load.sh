#!/usr/bin/env bash
# Runs the whole test suite of build/ once more with a CPU hog on every core
# beside it (stress-ng): tests must assert behaviour, never wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v stress-ng >/dev/null || { echo "stress-ng not found (scripts/setup.sh --test)" >&2 && exit 1; }
stress-ng --cpu "$(nproc)" --timeout 3600s --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true' EXIT
ctest --test-dir build --output-on-failure -j 2
