#!/usr/bin/env bash
# Installs what lockstep needs (scripts/setup.sh) and builds it in build/:
# every target, or the targets given (scripts/train.sh builds `lockstep`,
# with its CUDA plugin, and not the tests). Extra CMake arguments come from
# $CMAKE_ARGS (e.g. -DLOCKSTEP_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
cmake --build build -j "$(nproc)" ${1:+--target "$@"}
