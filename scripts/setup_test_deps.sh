#!/usr/bin/env bash
# Installs what the interoperability tests need (tests/interop): Debian's
# python3-torch, and a virtual environment inside the build tree
# (build/pyenv, seeing the system packages) with safetensors, onnx,
# onnxruntime and tensorboard from PyPI. Training and the build need none
# of it. Idempotent.
#   usage: scripts/setup_test_deps.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
venv="$build_dir/pyenv"

packages=(python3 python3-venv python3-pip python3-numpy python3-torch)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup_test_deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# numpy below 2: Debian's torch is built against numpy 1.
pip_packages=("numpy<2" safetensors onnx onnxruntime tensorboard)
check='import numpy, torch, safetensors, onnx, onnxruntime, tensorboard; torch.from_numpy(numpy.zeros(1))'
if [ -x "$venv/bin/python" ] &&
  "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "setup_test_deps: $venv ready"
  exit 0
fi
mkdir -p "$build_dir"
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "${pip_packages[@]}"
"$venv/bin/python" -c "$check"
echo "setup_test_deps: $venv ready"
