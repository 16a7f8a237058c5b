#!/usr/bin/env bash
# Builds lockstep with the CUDA backend (sm_80 and sm_90) and gathers into
# OUTDIR what a bare CUDA node lacks, so that `bash OUTDIR/gpu_check.sh
# RESULTS_DIR` is the whole procedure there. What travels (at most
# $LOCKSTEP_BUNDLE_LIMIT_MIB, 48 MiB):
#
#   gpu_check.sh, gpu_check_lib.sh   the check (unpacks the archives first)
#   programs.tar.xz  bin/     lockstep, liblockstep_cuda.so (found beside it),
#                             mpiexec and hydra_pmi_proxy
#                    lib/     shared libraries that are neither the C library
#                             nor the CUDA stack (MPICH, UCX, hwloc, toml++,
#                             protobuf/ONNX, ...); lib/fallback/: libstdc++
#                             and libgcc_s, used when the node's are too old
#                    tests/   lockstep_tests, lockstep_mpi_tests
#                    configs/, torch_reference.py, pytorch_models.py, MANIFEST
#   data.tar.xz      data/    Fashion-MNIST as raw IDX (xz packs it 15%
#                             tighter than the packaged gzip files)
#
# OUTDIR holds these four files only; gpu_check.sh unpacks the archives
# beside itself (scripts/gpu_bundle_test.sh checks the unpacked tree).
#
# usage: scripts/gpu_bundle.sh OUTDIR [BUILD_DIR]
# BUILD_DIR (default build/) is reused when it is a CUDA build for sm_80 and
# sm_90 (the default architectures); otherwise it is configured with
# LOCKSTEP_CUDA=REQUIRE. Binaries are stripped. data.tar.xz is cached in
# BUILD_DIR (the data set does not change between builds).
# LOCKSTEP_BUNDLE_XZ_LEVEL (default 6) is xz's level for both archives: the
# ctest test packs at 1 (4x faster, 12% larger), a real bundle at 6.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/gpu_bundle.sh OUTDIR [BUILD_DIR]}
build=${2:-$root/build}
limit_mib=${LOCKSTEP_BUNDLE_LIMIT_MIB:-48}
xz_level=${LOCKSTEP_BUNDLE_XZ_LEVEL:-6}
[[ $xz_level =~ ^[0-9]$ ]] || { echo "gpu_bundle: LOCKSTEP_BUNDLE_XZ_LEVEL=$xz_level: use 0-9" >&2 && exit 2; }
data=${LOCKSTEP_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}

# The C library and the loader (the node has its own), and the CUDA stack (the
# node's driver, toolkit or pip wheels provide it): never bundled.
libc_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl)\.so'
cuda_re='^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc[a-z-]*|nvJitLink|nvToolsExt|cupti)\.so'

if [[ ! -f $build/CMakeCache.txt ]]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=REQUIRE \
    '-DCMAKE_CUDA_ARCHITECTURES=80-real;90' ${CMAKE_ARGS:-}
fi
# The architectures nvcc compiles for, from the build's own rules (Ninja or Make).
archs=$(cat "$build/build.ninja" "$build/CMakeFiles/lockstep_cuda_objects.dir/flags.make" 2>/dev/null |
  grep -o 'code=\[[a-z_0-9,]*\]' | sort -u | tr -d '[]' | sed 's/code=//' | paste -sd, || true)
if [[ ,$archs, != *,sm_80,* || ,$archs, != *,sm_90,* ]]; then
  echo "gpu_bundle: $build is not a CUDA build for sm_80 and sm_90 (nvcc targets: '${archs:-none}');" \
    "configure it with -DLOCKSTEP_CUDA=REQUIRE or name another BUILD_DIR" >&2
  exit 1
fi
# LOCKSTEP_BUNDLE_BUILD=0 (the ctest test): take the build as it is.
if [[ ${LOCKSTEP_BUNDLE_BUILD:-1} != 0 ]]; then
  cmake --build "$build" -j "$(nproc)" --target lockstep lockstep_cuda lockstep_tests lockstep_mpi_tests
fi

rm -rf "$out"
mkdir -p "$out"/{bin,lib,tests,configs}
out=$(cd "$out" && pwd)
put() {  # put SRC DEST: a stripped copy
  strip --strip-unneeded -o "$2" "$1"
  chmod 755 "$2"
}
put "$build/lockstep" "$out/bin/lockstep"
put "$build/liblockstep_cuda.so" "$out/bin/liblockstep_cuda.so"
put "$build/tests/lockstep_tests" "$out/tests/lockstep_tests"
put "$build/tests/lockstep_mpi_tests" "$out/tests/lockstep_mpi_tests"
# MPICH's launcher (hydra) and its proxy, for the multi-rank checks.
mpiexec_real=$(readlink -f "$(command -v mpiexec)")
put "$mpiexec_real" "$out/bin/mpiexec"
put "$(dirname "$mpiexec_real")/hydra_pmi_proxy" "$out/bin/hydra_pmi_proxy"

# UCX (MPICH's ch4 device) loads its transports from ucx/ beside libucs;
# shared memory (cma) is the one a single node uses.
ucx_dir=$(dirname "$(ldconfig -p | sed -n 's/.*libucs\.so\.0.*=> //p' | head -n1)")/ucx
if [[ -f $ucx_dir/libuct_cma.so.0 ]]; then
  mkdir -p "$out/lib/ucx"
  put "$(readlink -f "$ucx_dir/libuct_cma.so.0")" "$out/lib/ucx/libuct_cma.so.0"
fi

# Every library ldd names for any bundled ELF file, except libc and CUDA.
add_libraries() {
  local file name arrow path rest
  for file in "$@"; do
    while read -r name arrow path rest; do
      [[ $arrow == "=>" && $path == /* ]] || continue
      [[ $name =~ $libc_re || $name =~ $cuda_re || $path == /usr/local/cuda* ]] && continue
      [[ -e $out/lib/$name ]] || put "$(readlink -f "$path")" "$out/lib/$name"
    done < <(ldd "$file")
  done
}
mapfile -t elves < <(find "$out/bin" "$out/tests" "$out/lib" -type f)
add_libraries "${elves[@]}"
# The C++ runtime only where the node's is too old (gpu_check.sh decides):
# this one needs glibc 2.36, the rest of the bundle 2.34.
mkdir -p "$out/lib/fallback"
for lib in libstdc++.so.6 libgcc_s.so.1; do
  [[ -e $out/lib/$lib ]] && mv "$out/lib/$lib" "$out/lib/fallback/$lib"
done

mkdir -p "$out/data"
cp "$root"/configs/*.toml "$out/configs/"
cp "$root/scripts/gpu_check.sh" "$root/scripts/gpu_check_lib.sh" "$out/"
cp "$root/bench/torch_reference_gpu.py" "$out/torch_reference.py"
cp "$root/tests/interop/pytorch_models.py" "$out/pytorch_models.py"
{
  echo "lockstep $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), CUDA architectures $archs"
  (cd "$out" && find . -type f -printf '%s %p\n' | sort -k2)
} >"$out/MANIFEST"

# The data: raw IDX files, packed once per build folder.
data_archive=$build/gpu_bundle_data.tar.xz
sums="xz -$xz_level $(cd "$data" && cksum {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz)"
if [[ ! -f $data_archive || $(cat "$data_archive.sums" 2>/dev/null) != "$sums" ]]; then
  stage=$(mktemp -d)
  mkdir "$stage/data"
  for f in {train,t10k}-{images-idx3,labels-idx1}-ubyte; do gzip -dc "$data/$f.gz" >"$stage/data/$f"; done
  tar -C "$stage" -cf - data | xz "-$xz_level" -T0 >"$data_archive.tmp"
  rm -rf "$stage"
  mv "$data_archive.tmp" "$data_archive"
  echo "$sums" >"$data_archive.sums"
fi
cp "$data_archive" "$out/data.tar.xz"
tar -C "$out" -xJf "$out/data.tar.xz"
tar -C "$out" -cf - bin lib tests configs torch_reference.py pytorch_models.py MANIFEST |
  xz "-$xz_level" -T0 >"$out/programs.tar.xz"

(cd "$out" && rm -rf bin lib tests configs data torch_reference.py pytorch_models.py MANIFEST)
size_kib=$(du -ck "$out"/gpu_check.sh "$out"/gpu_check_lib.sh "$out"/*.tar.xz | tail -n1 | cut -f1)
echo "gpu_bundle: $out: gpu_check.sh, gpu_check_lib.sh, programs.tar.xz and data.tar.xz," \
  "$((size_kib / 1024)) MiB ($size_kib KiB) to carry"
if ((size_kib > limit_mib * 1024)); then
  echo "gpu_bundle: the bundle is over the $limit_mib MiB limit" >&2
  exit 1
fi
