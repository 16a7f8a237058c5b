#!/usr/bin/env bash
# Sets up, builds, and runs every test (single-process and multi-rank).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j 2
