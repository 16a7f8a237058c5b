#!/usr/bin/env bash
# Sets up, builds, and runs every test (single-process and multi-rank).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# Python for the interoperability tests only (PyTorch, onnxruntime, TensorBoard).
bash scripts/setup_test_deps.sh build
ctest --test-dir build --output-on-failure -j 2
