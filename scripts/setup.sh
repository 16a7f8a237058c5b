#!/usr/bin/env bash
# Installs the Debian packages lockstep needs to build, test and train;
# with --test also what the CI lanes need (clang and its libFuzzer runtime
# for the sanitizer and fuzz builds, clang-format for tests/test_style.cpp,
# stress-ng for the run under load, iproute2 for the fake cluster of
# tests/cluster/).
# Idempotent: packages already present are left as they are.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libeigen3-dev libcli11-dev libtomlplusplus-dev libstb-dev libgtest-dev
  mpich libmpich-dev nlohmann-json3-dev zlib1g-dev
  dataset-fashion-mnist shellcheck curl gnuplot-nox
  libonnx-dev libprotobuf-dev
)
if [ "${1:-}" = "--test" ]; then
  packages+=(clang clang-format libclang-rt-dev stress-ng iproute2)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
