#!/usr/bin/env bash
# Side-by-side throughput of lockstep and PyTorch on this machine, in one run:
# for every case the two are measured back to back (the machine is shared and
# noisy; only ratios from the same run are meaningful).
#
#   bench/compare_pytorch.sh [--precision fp32|bf16] [--models "m1 m2"] [seconds-per-case]
#                                                      throughput table (bf16: lockstep's
#                                                      precision = bf16 against PyTorch's
#                                                      torch.autocast("cpu", torch.bfloat16))
#   bench/compare_pytorch.sh --isa avx2 ...            both sides held to AVX2 (what AMD
#                                                      Rome/Milan nodes run): lockstep with
#                                                      LOCKSTEP_CPU_ISA=avx2, PyTorch with
#                                                      ATEN_CPU_CAPABILITY=avx2 and
#                                                      ONEDNN_MAX_CPU_ISA=AVX2
#   bench/compare_pytorch.sh --reference-run [epochs]  32-epoch Fashion-MNIST
#                                                      run, wall time and peak RSS
# Needs a built lockstep (scripts/build.sh) and a Python with torch
# (Debian python3-torch); $PYTHON overrides the interpreter. Debian's torch
# calls the system BLAS: install libopenblas0-pthread, or its linear layers
# run on the slow reference BLAS and the comparison flatters lockstep.
set -euo pipefail
cd "$(dirname "$0")/.."
lockstep=./build/lockstep
python=${PYTHON:-/usr/bin/python3}
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "compare_pytorch: $python has no torch; install python3-torch or set PYTHON" >&2
  exit 1
fi

if [ "${1:-}" = "--reference-run" ]; then
  epochs=${2:-32}
  echo "reference run: mnist_net, Fashion-MNIST, batch 64, $epochs epochs, 2 threads"
  /usr/bin/time -f "lockstep wall %e s, peak RSS %M KiB" "$lockstep" train \
    --config configs/fashion_mnist.toml --epochs "$epochs" --threads 2 --progress plain \
    --checkpoint-every 0 --run-dir "$(mktemp -d)" | tail -n 1
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 \
    /usr/bin/time -f "pytorch  wall %e s, peak RSS %M KiB" "$python" bench/pytorch_reference.py \
    reference-run --epochs "$epochs" --threads 2 | tail -n 1
  exit 0
fi

precision=fp32
models=${MODELS:-mnist_net alexnet_cifar resnet20}
while [ $# -gt 0 ]; do
  case "$1" in
    --precision) precision=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --isa)
      [ "$2" = avx2 ] || { echo "compare_pytorch: --isa takes avx2, got '$2'" >&2 && exit 2; }
      export LOCKSTEP_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
      shift 2
      ;;
    *) break ;;
  esac
done
seconds=${1:-3}
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), instruction sets: ${LOCKSTEP_CPU_ISA:-all the CPU has}"
printf '%-14s %6s %8s %9s %14s %14s %8s\n' model batch threads precision lockstep_img/s pytorch_img/s ratio
for model in $models; do
  batch=128
  [ "$model" = mnist_net ] && batch=64
  for threads in 1 2; do
    ours=$("$lockstep" bench --model "$model" --threads "$threads" --batch "$batch" \
      --precision "$precision" --seconds "$seconds" | sed -n 's/.*"images_per_second": \([0-9.]*\).*/\1/p')
    theirs=$(OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads "$python" bench/pytorch_reference.py throughput --model "$model" --batch "$batch" \
      --threads "$threads" --precision "$precision" --seconds "$seconds" |
      sed -n 's/.*"images_per_second": \([0-9.]*\).*/\1/p')
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
    printf '%-14s %6s %8s %9s %14.1f %14.1f %8s\n' "$model" "$batch" "$threads" "$precision" "$ours" "$theirs" "$ratio"
  done
done
