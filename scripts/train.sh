#!/usr/bin/env bash
# Sets up, builds, and trains the reference network on Fashion-MNIST (the
# default experiment, configs/fashion_mnist.toml). Extra arguments are passed
# to `lockstep train`, e.g. scripts/train.sh --epochs 2.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh lockstep
exec ./build/lockstep train --config configs/fashion_mnist.toml "$@"
