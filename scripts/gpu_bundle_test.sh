#!/usr/bin/env bash
# Makes the GPU bundle from an existing CUDA build and proves it closed (the
# ctest test gpu_bundle, tests/CMakeLists.txt):
#   1. with the loader limited to BUNDLE/lib (and lib/fallback: the C++
#      runtime for nodes whose own is too old), ldd resolves every dependency
#      of every bundled ELF file inside the bundle, except the C library and
#      the CUDA stack;
#   2. lockstep info, lockstep doctor and a short CPU training run work from
#      the bundle, with its data;
#   3. gpu_check.sh's dry run passes and writes its summary; asked to
#      require a GPU (GPU_CHECK_REQUIRE_GPU=1, as on a lent GPU machine),
#      the same dry run fails, saying so.
#
# usage: scripts/gpu_bundle_test.sh BUNDLE BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:?usage: scripts/gpu_bundle_test.sh BUNDLE BUILD_DIR}
build=${2:?usage: scripts/gpu_bundle_test.sh BUNDLE BUILD_DIR}
# Packed at xz level 1, not 6: what is checked here does not depend on the
# level, and level 6 took a minute of CI's two cores. The larger archives
# are held to a limit raised as much (56 MiB, not 48).
LOCKSTEP_BUNDLE_BUILD=0 LOCKSTEP_BUNDLE_XZ_LEVEL=1 LOCKSTEP_BUNDLE_LIMIT_MIB=56 \
  bash "$root/scripts/gpu_bundle.sh" "$bundle" "$build"
bundle=$(cd "$bundle" && pwd)
# Unpacked as gpu_check.sh unpacks it on the GPU node.
for archive in programs data; do tar -C "$bundle" -xJf "$bundle/$archive.tar.xz"; done
fail() {
  echo "gpu_bundle_test: $*" >&2
  exit 1
}
libc_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl)\.so'
cuda_re='^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc[a-z-]*|nvJitLink|nvToolsExt|cupti)\.so'

# 1. Closure.
checked=0
while read -r file; do
  [[ $(head -c4 "$file" | od -An -c | tr -d ' ') == 177ELF ]] || continue
  checked=$((checked + 1))
  while read -r name arrow path rest; do
    [[ $arrow == "=>" ]] || continue
    [[ $name =~ $libc_re || $name =~ $cuda_re ]] && continue
    [[ $path == "$bundle"/* ]] || fail "${file#"$bundle"/} needs $name, found at '$path $rest', not in the bundle"
  done < <(env -u LD_PRELOAD LD_LIBRARY_PATH="$bundle/lib:$bundle/lib/fallback" ldd "$file")
done < <(find "$bundle" -type f)
((checked >= 6)) || fail "only $checked ELF files in $bundle"
echo "gpu_bundle_test: $checked ELF files resolve inside the bundle (besides libc and CUDA)"

# 2. The command from the bundle.
export LD_LIBRARY_PATH="$bundle/lib"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bundle/bin/lockstep" info >"$out/info.log" 2>&1 || fail "lockstep info: $(cat "$out/info.log")"
grep -q "plugin $bundle/bin/liblockstep_cuda.so" "$out/info.log" ||
  fail "lockstep info does not load the bundle's plugin: $(cat "$out/info.log")"
"$bundle/bin/lockstep" doctor >"$out/doctor.log" 2>&1 || fail "lockstep doctor: $(cat "$out/doctor.log")"
"$bundle/bin/lockstep" train --config "$bundle/configs/fashion_mnist.toml" --data-dir "$bundle/data" \
  --epochs 1 --train-subset 512 --test-subset 256 --device cpu --run-dir "$out/run" \
  >"$out/train.log" 2>&1 || fail "lockstep train: $(tail -n5 "$out/train.log")"
[[ -f $out/run/metrics.csv && -f $out/run/COMPLETE ]] || fail "the training run left no metrics.csv"
echo "gpu_bundle_test: lockstep info, doctor and a CPU training run work from the bundle"

# 3. The check's dry run, its results beside the bundle (.ci/run prints them).
unset LD_LIBRARY_PATH
check=$bundle.dry_run
rm -rf "$check"
rm -rf "$check.pack"
GPU_CHECK_DRY_RUN=1 bash "$bundle/gpu_check.sh" "$check" "$check.pack" ||
  fail "gpu_check.sh dry run failed"
# What a machine that returns a few files sends back: three files.
for f in summary.md summary.json results.tar.xz; do
  [[ -f $check.pack/$f ]] || fail "the packed results lack $f"
done
listing=$(tar -tJf "$check.pack/results.tar.xz")  # whole: grep -q would cut tar's pipe
grep -q '/gpu_tests.xml$' <<<"$listing" || fail "results.tar.xz lacks gpu_tests.xml"
grep -q '"status": "pass", "mode": "dry run"' "$check/summary.json" ||
  fail "summary.json: $(cat "$check/summary.json")"
grep -q '| train_fp32 | no GPU |' "$check/summary.md" || fail "summary.md: no 'no GPU' step"
# On a machine lent for its GPU a dry run must not pass: GPU_CHECK_REQUIRE_GPU.
if GPU_CHECK_DRY_RUN=1 GPU_CHECK_REQUIRE_GPU=1 bash "$bundle/gpu_check.sh" "$check.required" \
  2>/dev/null; then
  fail "gpu_check.sh passed a dry run under GPU_CHECK_REQUIRE_GPU=1"
fi
grep -q '| gpu | fail | 0 | GPU_CHECK_REQUIRE_GPU=1 but no GPU was found' "$check.required/summary.md" ||
  fail "summary.md under GPU_CHECK_REQUIRE_GPU=1: $(cat "$check.required/summary.md")"
rm -rf "$check.required"
echo "gpu_bundle_test: gpu_check.sh dry run passed ($check)"
