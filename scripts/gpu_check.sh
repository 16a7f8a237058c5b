#!/usr/bin/env bash
# The GPU check of a lockstep bundle (scripts/gpu_bundle.sh), the whole
# procedure on a bare GPU node:
#
#   bash BUNDLE/gpu_check.sh RESULTS_DIR [PACK_DIR]
#
# PACK_DIR (the device tool's $OUT): at the end, however the check ends,
# summary.md, summary.json and results.tar.xz (RESULTS_DIR without
# checkpoints, weights or images) are copied there: three files at its top,
# for a machine that sends back only a few files, two folders deep. The
# bundle's archives are unpacked into a scratch folder ($GPU_CHECK_WORK, or
# a new one under $TMPDIR), never beside this script: the bundle stays as
# small as it was made, and stale binaries are never run.
#
# Steps, most valuable first, each under its own timeout and all within
# $GPU_CHECK_BUDGET_S (470 s):
#   1 versions     driver, runtime, cuDNN, cuBLAS, NCCL (lockstep info);
#                  refuses, and stops, when the driver is older than the runtime
#   2 gpu_tests    Cuda*, Cudnn*, the device checkpoint test; nccl_tests: the
#                  NCCL suite on one rank; from the XML: no test skipped (on
#                  one rank reductions are identities: nccl_tests checks
#                  NCCL's start-up, aborts, the host path and the ordering of
#                  an out-of-place allgather behind queued work, not sums
#                  across GPUs)
#   3 train_fp32   lockstep train, Fashion-MNIST, 32 epochs, --device cuda;
#     train_bf16   fp32 must land within 0.3 points of the CPU: the mean test
#                  accuracy of the last five epochs against the CPU's 87.91%
#                  (its last epoch 88.03%; one epoch to the next moves by up
#                  to 0.3 points, so a single epoch would fail by chance)
#     resume       2 epochs with checkpoints, then --resume auto to 3 (device
#                  tensors saved and restored)
#   4 torch        the same 32 epochs in PyTorch on the same GPU
#   5 memcheck, racecheck, synccheck: compute-sanitizer on a test subset
#   6 resnet20_fp32, resnet20_bf16, resnet20_torch: 3 epochs of a residual
#                  network in lockstep and in PyTorch, images/s side by side
#   7 same_bits_mnist, same_bits_resnet20: two runs with deterministic = true
#                  write the same weights, bit for bit
#   8 profile_resnet20, profile_mnist: ncu's kernel times of steady-state
#                  steps, by kernel (informs; "no profile" cannot fail it)
# RESULTS_DIR gets every log, the gtest XML, the runs' metrics.csv and
# summary.md + summary.json. Exit status 1 when a step failed, or when the
# check is incomplete: a step not started for want of time (less than half
# its limit left), no torch, or compute-sanitizer refusing the device; the
# summary says which ("fail" or "incomplete").
#
# Without a GPU (or with GPU_CHECK_DRY_RUN=1) it is a dry run: the CPU parts
# run (lockstep info, the GPU test binaries, whose tests must all skip with
# "no device", never "CUDA code not built"; a short CPU training run) and
# every GPU step reports "no GPU". CI runs it so (tests/CMakeLists.txt).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
results=${1:?usage: bash gpu_check.sh RESULTS_DIR [PACK_DIR]}
pack=${2:-}
mkdir -p "$results"
results=$(cd "$results" && pwd)
deadline=$(($(date +%s) + ${GPU_CHECK_BUDGET_S:-470}))
# shellcheck source=scripts/gpu_check_lib.sh
source "$here/gpu_check_lib.sh"
# The bundle's archives (scripts/gpu_bundle.sh), unpacked into a scratch
# folder (removed at the end unless given); a bundle already unpacked (bin/
# beside this script) runs in place.
root=$here scratch=""
if [[ -f $here/programs.tar.xz ]]; then
  if [[ -n ${GPU_CHECK_WORK:-} ]]; then
    root=$GPU_CHECK_WORK
    mkdir -p "$root"
  else
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/lockstep_gpu_check.XXXXXX") root=$scratch
  fi
fi
# The Python with PyTorch and NVIDIA's wheels: $PYTHON, python3 when it has
# torch, else the lent GPU machines' venv.
python=${PYTHON:-}
if [[ -z $python ]]; then
  for candidate in "$(command -v python3 || true)" /opt/torch/.venv/bin/python3; do
    # find_spec, not import: importing torch takes seconds of the budget.
    if [[ -x $candidate ]] &&
      timeout 30 "$candidate" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' \
        >/dev/null 2>&1; then
      python=$candidate
      break
    fi
  done
  python=${python:-$(command -v python3 || true)}
fi

trap 'pack_results "$pack"; [[ -z $scratch ]] || rm -rf "$scratch"' EXIT
mode="not known yet" bundle_version="not unpacked yet"
if [[ $root != "$here" ]]; then
  for archive in programs data; do
    if ! unpack_archive "$here/$archive.tar.xz" "$root" "$python" 2>"$results/unpack.log"; then
      record unpack fail 0 "$archive.tar.xz: $(tail -n1 "$results/unpack.log")"
      exit 1
    fi
  done
fi
bundle_version=$(head -n1 "$root/MANIFEST" 2>/dev/null || echo "not a bundle")
lockstep=$root/bin/lockstep
tests=$root/tests
node_library_path=${LD_LIBRARY_PATH:-}  # PyTorch runs with the node's own
export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The bundle's C++ runtime only when the node's lacks a version it needs
# (ldd's whole output first: grep -q leaving a pipe early would end ldd with
# SIGPIPE, a failure under pipefail).
needs=$(ldd "$root/bin/lockstep" "$root/tests/lockstep_tests" 2>&1 || true)
if grep -Eq "(libstdc\+\+|libgcc_s)[^ ]* => not found|version .GLIBCXX|version .GCC_" <<<"$needs"; then
  LD_LIBRARY_PATH="$root/lib:$root/lib/fallback${LD_LIBRARY_PATH#"$root/lib"}"
fi
export PATH="$root/bin:$PATH"
# cuDNN, cuBLAS, NCCL, the runtime: the system's copies first; what the loader
# cannot find there comes from the pip wheels (site-packages/nvidia/*/lib).
wheel_dirs=()
if [[ -n $python ]]; then
  while read -r dir; do
    [[ -d $dir ]] && wheel_dirs+=("$dir")
  done < <("$python" -c 'import glob, nvidia
for p in nvidia.__path__: print("\n".join(sorted(glob.glob(p + "/*/lib"))))' 2>/dev/null || true)
fi
for _ in 1 2 3 4; do  # again: a wheel's library may need another wheel's
  added=0
  for soname in $(ldd "$root/bin/liblockstep_cuda.so" "$tests/lockstep_tests" 2>/dev/null |
    awk '/not found/ { print $1 }' | sort -u); do
    for dir in "${wheel_dirs[@]}"; do
      if [[ -e $dir/$soname && :$LD_LIBRARY_PATH: != *:$dir:* ]]; then
        LD_LIBRARY_PATH+=":$dir" added=1
        break
      fi
    done
  done
  ((added)) || break
done

# A GPU node: nvidia-smi lists a GPU, or (nvidia-smi missing) a device file
# is there; a dry run only without either, or when asked for.
mode=gpu
# (Every nvidia-smi under a timeout: one that hangs on a sick GPU must not
# take the slot's time before anything is recorded.)
if [[ ${GPU_CHECK_DRY_RUN:-0} == 1 ]] ||
  { ! timeout 20 nvidia-smi -L >/dev/null 2>&1 && [[ ! -e /dev/nvidia0 ]]; }; then
  mode="dry run"
fi
# On a machine lent for its GPU a dry run would pass without checking
# anything: GPU_CHECK_REQUIRE_GPU=1 makes it a failure.
if [[ $mode == "dry run" && ${GPU_CHECK_REQUIRE_GPU:-0} == 1 ]]; then
  record gpu fail 0 "GPU_CHECK_REQUIRE_GPU=1 but no GPU was found (nvidia-smi -L, /dev/nvidia0)"
  exit 1
fi
gpu_step() { [[ $mode == gpu ]]; }
no_gpu() { record "$1" "no GPU" 0 "${2:-}"; }

# --- 1 versions --------------------------------------------------------------------------
run_logged versions 60 "$lockstep" info
info=$(cat "$results/versions.log")
runtime=$(sed -n 's/.*runtime \([0-9.]*\), driver.*/\1/p' <<<"$info" | head -n1)
driver=$(sed -n 's/.*runtime [0-9.]*, driver \([0-9.]*\).*/\1/p' <<<"$info" | head -n1)
libs=$(grep -o 'cuDNN [^,]*, cuBLAS [^,]*, NCCL [0-9.a-z]*' <<<"$info" | head -n1 || true)
metric[versions]="runtime ${runtime:-?}, driver ${driver:-none}, ${libs:-no plugin}"
metric[libraries]=$(sed -n 's/^ *\(lib[a-z]*\.so\) from /\1 /p' <<<"$info" | paste -sd';' || true)
if gpu_step; then
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    >>"$results/versions.log" 2>&1 || true
  metric[gpu]=$(timeout 20 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
    2>/dev/null | head -n1 || true)
fi
detail="${metric[versions]}; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
if ((run_rc != 0)) || [[ -z $runtime || -z $libs ]]; then
  record versions fail "$run_seconds" "lockstep info failed or shows no plugin (versions.log)"
  # On a GPU nothing after this can run: stop, leaving the slot's time for
  # a second try.
  gpu_step && exit 1
elif gpu_step && [[ -z $driver || ${driver%%.*} -lt ${runtime%%.*} ]]; then
  record versions refused "$run_seconds" "the driver supports CUDA ${driver:-none}, the runtime needs \
${runtime}: update the NVIDIA driver (or bring a bundle built with an older toolkit)"
  exit 1
else
  record versions pass "$run_seconds" "$detail"
fi

# --- 2 the GPU tests -----------------------------------------------------------------------
# gtest_step NAME XML SECONDS CMD...: runs a gtest binary; on a GPU nothing may
# skip; in a dry run every skip must say "no device" (the code was built).
gtest_step() {
  local name=$1 xml=$2 limit=$3 status detail
  shift 3
  run_logged "$name" "$limit" "$@"
  if ((run_rc == 125)); then
    record "$name" "no time" "$run_seconds" "$(tail -n1 "$results/$name.log")"
    return
  fi
  xml_counts "$xml"
  status=$(status_of "$run_rc")
  detail="$xml_tests tests, $xml_failures failed, $xml_skipped skipped"
  [[ -z $xml_failed_names ]] || detail+=" (failed: $xml_failed_names)"
  # compute-sanitizer's own verdict, apart from the tests' (its lines start
  # with "========= ": "ERROR SUMMARY: 0 errors", "RACECHECK SUMMARY: 0
  # hazards displayed (0 errors, ...)").
  local sanitized
  sanitized=$(sed -n 's/^========= \([A-Z]* *SUMMARY: .*\)/\1/p' "$results/$name.log" | tail -n1)
  [[ -z $sanitized ]] || detail+="; compute-sanitizer: ${sanitized}"
  if grep -q 'Device not supported' "$results/$name.log"; then
    status=unsupported detail="compute-sanitizer does not support this device ($name.log)"
  elif ((xml_tests == 0)) && [[ $status != pass ]]; then
    # gtest writes its XML at the end: a run killed or crashed has none.
    detail="no XML report ($status); the log ends: $(tail -n1 "$results/$name.log")"
  elif ((xml_tests == 0)); then
    status=fail detail="no tests ran ($name.log)"
  elif gpu_step && ((xml_skipped > 0)); then
    status=fail detail+="; skipped on a GPU: $(head -n3 <<<"$xml_skip_text" | tr '\n' ';')"
  elif ! gpu_step && [[ -n $xml_skip_text ]] && grep -qv '^no device' <<<"$xml_skip_text"; then
    status=fail detail+="; a skip other than 'no device': $(grep -v '^no device' <<<"$xml_skip_text" |
      head -n1)"
  elif ! gpu_step && [[ $status == pass ]]; then
    status="no GPU" detail+=" (the CPU-side tests passed; the rest skip: no device)"
  fi
  record "$name" "$status" "$run_seconds" "$detail"
}
# (CudaPlugin.* and CudaLibraries.* need the build tree's helper files: CI runs them.)
gpu_filter='Cuda*:Cudnn*:*/Cuda*:CheckpointFormat.DeviceTensors*:-CudaPlugin.*:CudaLibraries.*'
gtest_step gpu_tests "$results/gpu_tests.xml" 180 "$tests/lockstep_tests" \
  "--gtest_filter=$gpu_filter" "--gtest_output=xml:$results/gpu_tests.xml"
# One rank, started by MPICH's fork launcher (no ssh) on 127.0.0.1 (its
# proxy would otherwise connect back to the machine's host name, which a
# bare machine may not resolve); NCCL says why, should it fail.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
gtest_step nccl_tests "$results/nccl_tests.xml" 90 mpiexec -launcher fork -localhost 127.0.0.1 -n 1 "$tests/lockstep_mpi_tests" \
  --expect-ranks=1 '--gtest_filter=Nccl*' "--gtest_output=xml:$results/nccl_tests.xml"

# --- 3 lockstep train, 32 epochs ---------------------------------------------------------------
# train_step NAME SECONDS CONFIG FLAGS...: a run of configs/CONFIG ($results/NAME)
# with its metrics. Sets status and detail for the caller to record.
train_step() {
  local name=$1 limit=$2 config=$3
  shift 3
  run_logged "$name" "$limit" "$lockstep" train --config "$root/configs/$config" \
    --data-dir "$root/data" --run-dir "$results/$name" --checkpoint-every 0 "$@"
  status=$(status_of "$run_rc")
  metrics_summary "$results/$name/metrics.csv"
  detail="wall $run_seconds s, ${csv_summary:-no epoch finished}"
  [[ $status == pass ]] || detail+="; $(tail -n1 "$results/$name.log")"
  metric[$name]=$detail
}
# The CPU's run of the same command (--device cpu, seed 42; 2026-11-28, AMD
# EPYC Zen 4): test accuracy 88.03% after epoch 32, 87.91% the mean of epochs
# 28-32 (88.09, 87.91, 87.82, 87.72, 88.03).
cpu_last5=87.91
if gpu_step; then
  train_step train_fp32 150 fashion_mnist.toml --epochs 32 --device cuda
  if [[ $status == pass ]] &&
    ! awk -v a="${csv_accuracy_last5:-0}" -v c="$cpu_last5" 'BEGIN { d = a - c; exit !(d <= 0.3 && d >= -0.3) }'; then
    status=fail
    detail+="; fp32 accuracy ${csv_accuracy_last5:-?}% (last 5 epochs) is not within 0.3 of the CPU's $cpu_last5%"
  fi
  record train_fp32 "$status" "$run_seconds" "$detail"
  train_step train_bf16 150 fashion_mnist.toml --epochs 32 --device cuda --precision bf16
  # bf16 rounds every product's inputs: a looser band, one point.
  if [[ $status == pass ]] &&
    ! awk -v a="${csv_accuracy_last5:-0}" -v c="$cpu_last5" 'BEGIN { d = a - c; exit !(d <= 1 && d >= -1) }'; then
    status=fail
    detail+="; bf16 accuracy ${csv_accuracy_last5:-?}% (last 5 epochs) is not within 1 point of the CPU's fp32 $cpu_last5%"
  fi
  record train_bf16 "$status" "$run_seconds" "$detail"
else
  # The CPU part: the same command, on the CPU, short.
  train_step train_cpu 120 fashion_mnist.toml --epochs 1 --device cpu --train-subset 2048 --test-subset 1000
  [[ -n $csv_accuracy ]] || status=fail detail+="; no test accuracy in metrics.csv"
  record train_cpu "$status" "$run_seconds" "$detail"
  no_gpu train_fp32 "lockstep train, 32 epochs, --device cuda"
  no_gpu train_bf16 "the same, --precision bf16"
fi

# --- 3b checkpoints on the device: two epochs with a checkpoint each, then
# --resume auto to a third (on the CPU, briefly, in a dry run) ---------------------------------
resume_step() {
  local dir=$results/resume first epochs
  rm -rf "$dir" "$results/resume.log"
  run_logged resume_first 90 "$lockstep" train --config "$root/configs/fashion_mnist.toml" \
    --data-dir "$root/data" --run-dir "$dir" --checkpoint-every 1 --epochs 2 "$@"
  first=$run_seconds
  if ((run_rc == 0)); then
    run_logged resume 90 "$lockstep" train --config "$root/configs/fashion_mnist.toml" \
      --data-dir "$root/data" --run-dir "$dir" --checkpoint-every 1 --epochs 3 --resume auto "$@"
  fi
  status=$(status_of "$run_rc")
  detail="2 epochs in $first s, then --resume auto to 3"
  epochs=$(($(wc -l <"$dir/metrics.csv" 2>/dev/null || echo 1) - 1))
  if [[ $status != pass ]]; then
    detail+="; $(tail -n1 "$results/resume.log" 2>/dev/null || tail -n1 "$results/resume_first.log")"
  elif ! grep -q 'resumed after epoch 2' "$results/resume.log"; then
    status=fail detail+="; resume.log does not say 'resumed after epoch 2'"
  elif ((epochs != 3)); then
    status=fail detail+="; metrics.csv holds $epochs epochs, not 3"
  fi
  record resume "$status" "$run_seconds" "$detail"
}
if gpu_step; then
  resume_step --device cuda
else
  resume_step --device cpu --train-subset 2048 --test-subset 1000
fi

# --- 4 PyTorch, the same run ---------------------------------------------------------------
# (torch_step: gpu_check_lib.sh)
if gpu_step && ! timeout 90 env LD_LIBRARY_PATH="$node_library_path" "$python" -c 'import torch' \
  >"$results/torch.log" 2>&1; then
  record torch "no torch" 0 "no PyTorch in ${python:-python3} (torch.log)"
elif gpu_step; then
  torch_ok=1
  torch_step torch 150 train_fp32 --epochs 32 --data-dir "$root/data"
else
  no_gpu torch "torch_reference.py, 32 epochs on the GPU"
fi

# --- 5 compute-sanitizer ---------------------------------------------------------------------
# compute-sanitizer: PATH, the toolkit's folders, NVIDIA's images, the pip
# wheel (nvidia-cuda-sanitizer-api).
sanitizer=$(command -v compute-sanitizer || true)
if [[ -z $sanitizer ]]; then
  for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
    /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer/compute-sanitizer \
    "${wheel_dirs[@]/%\/lib/\/compute-sanitizer\/compute-sanitizer}"; do
    if [[ -x $candidate ]]; then
      sanitizer=$candidate
      break
    fi
  done
fi
subset='CudaBackendTest.ReluMatchesCpuExactly:CudaBackendTest.GemmMatchesCpu:CudaBackendTest.LossesMatchCpu'
subset+=':CudaBackendTest.SgdMatchesCpu:CudaBackendTest.DropoutMasksAreBitIdenticalToCpu'
subset+=':CudaShapes/CudaPoolTest.MatchesCpuExactly/n8_c10_24x24_k2_s2:CudaBackendTest.BatchNormMatchesCpu'
subset+=':CudaBackendTest.BatchNormSumsOverSeveralChunksAreExact'
subset+=':CudaBackendTest.AccumulatedLossesMatchCpuWithoutAHostWait'
subset+=':CudaBackendTest.BatchNormTrainingOpsMatchCpuWithoutAHostWait'
# racecheck and synccheck look at our kernels only (their names hold our
# namespace, lockstep::nn::cuda): hazards inside cuBLAS or cuDNN are not ours
# to fix, and checking them is slow. memcheck checks every kernel (a bad
# argument of ours shows up in the library's).
# (--help read whole: grep -q leaving a pipe early would end the writer with
# SIGPIPE, a failure under pipefail, and the filter would silently go.)
ours=()
if [[ -n $sanitizer ]]; then
  sanitizer_help=$(timeout 30 "$sanitizer" --help 2>&1 || true)
  [[ $sanitizer_help == *--kernel-name* ]] && ours=(--kernel-name kns=lockstep)
fi
for tool in memcheck racecheck synccheck; do
  if ! gpu_step; then
    no_gpu "$tool" "compute-sanitizer --tool $tool on a subset of the GPU tests"
  elif [[ -z $sanitizer ]]; then
    record "$tool" unsupported 0 "compute-sanitizer not found (PATH, /usr/local/cuda*, /opt/nvidia, the pip wheel): not lockstep's failure"
  else
    filter=()
    [[ $tool == memcheck ]] || filter=("${ours[@]}")
    gtest_step "$tool" "$results/$tool.xml" 120 "$sanitizer" --tool "$tool" --error-exitcode 1 \
      "${filter[@]}" "$tests/lockstep_tests" "--gtest_filter=$subset" \
      "--gtest_output=xml:$results/$tool.xml"
  fi
done

# --- 6 resnet20 against PyTorch --------------------------------------------------------------
# A residual network, what most users train: configs/resnet20_fashion_mnist.toml
# (batch 128, SGD momentum 0.9, weight decay 1e-4, cosine over the run) for
# 3 epochs in fp32 and bf16, and the same 3 epochs in PyTorch's eager loop
# (fp32, TF32 off): images/s side by side. Pass: each run ends, and fp32
# reaches 85% (three epochs give about 90%).
resnet_epochs=3
if gpu_step; then
  for precision in fp32 bf16; do
    train_step "resnet20_$precision" 90 resnet20_fashion_mnist.toml --epochs "$resnet_epochs" \
      --device cuda --precision "$precision"
    if [[ $status == pass && $precision == fp32 ]] &&
      ! awk -v a="${csv_accuracy:-0}" 'BEGIN { exit !(a >= 85) }'; then
      status=fail detail+="; fp32 test accuracy ${csv_accuracy:-?}% after $resnet_epochs epochs, under 85%"
    fi
    record "resnet20_$precision" "$status" "$run_seconds" "$detail"
  done
  if [[ -z ${torch_ok:-} ]]; then
    record resnet20_torch "no torch" 0 "no PyTorch in ${python:-python3} (torch.log)"
  else
    torch_step resnet20_torch 120 resnet20_fp32 --model resnet20 --epochs "$resnet_epochs" \
      --data-dir "$root/data"
  fi
else
  no_gpu resnet20_fp32 "lockstep train, resnet20, $resnet_epochs epochs, --device cuda"
  no_gpu resnet20_bf16 "the same, --precision bf16"
  no_gpu resnet20_torch "torch_reference.py --model resnet20, $resnet_epochs epochs on the GPU"
fi

# --- 7 the same bits twice ------------------------------------------------------------------
# With deterministic = true (cuDNN's deterministic algorithms; lockstep's own
# kernels use no atomics) two runs with the same seed must write the same
# weights, bit for bit: mnist_net for 2 epochs, and resnet20 (its BatchNorm
# reductions) for 1 epoch of 8192 samples. In a dry run: mnist_net briefly on
# the CPU.
# (repeat_step: gpu_check_lib.sh)
if gpu_step; then
  repeat_step same_bits_mnist fashion_mnist.toml --device cuda --epochs 2
  repeat_step same_bits_resnet20 resnet20_fashion_mnist.toml --device cuda --epochs 1 --train-subset 8192 \
    --test-subset 1000
else
  repeat_step same_bits_mnist fashion_mnist.toml --device cpu --epochs 1 --train-subset 2048 --test-subset 1000
  no_gpu same_bits_resnet20 "resnet20 twice with deterministic = true on the GPU"
fi

# --- 8 where the GPU's time goes ---------------------------------------------------------
# ncu's duration of each kernel in a window of steady-state steps (past
# cuDNN's algorithm search and the first steps): resnet20 and mnist_net in
# fp32. The table goes to results/NAME.md, the first three kernels to the
# summary. It informs and cannot fail the check: without ncu, or where it is
# refused the counters, the step says "no profile".
ncu=$(command -v ncu || true)
if [[ -z $ncu ]]; then
  for candidate in /usr/local/cuda/bin/ncu /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
    if [[ -x $candidate ]]; then
      ncu=$candidate
      break
    fi
  done
fi
# profile_step NAME CONFIG SKIP COUNT FLAGS...: COUNT kernels after the first SKIP
profile_step() {
  local name=$1 config=$2 launch_skip=$3 launch_count=$4 line
  shift 4
  run_logged "$name" 90 "$ncu" --launch-skip "$launch_skip" --launch-count "$launch_count" \
    --metrics gpu__time_duration.sum --csv --log-file "$results/$name.csv" \
    "$lockstep" train --config "$root/configs/$config" --data-dir "$root/data" \
    --run-dir "$results/$name" --checkpoint-every 0 --epochs 1 --device cuda "$@"
  status=$(status_of "$run_rc")
  if [[ $status == pass ]] && line=$(kernel_summary "$results/$name.csv" "$results/$name.md" 2>&1); then
    record "$name" pass "$run_seconds" "$line ($name.md)"
  elif [[ $status == "no time" ]]; then
    record "$name" "no time" "$run_seconds" "$(tail -n1 "$results/$name.log")"
  else
    record "$name" "no profile" "$run_seconds" "ncu ($status): ${line:-$(tail -n1 "$results/$name.log")}"
  fi
}
if ! gpu_step; then
  no_gpu profile_resnet20 "ncu: kernel times of resnet20's steps"
  no_gpu profile_mnist "ncu: kernel times of mnist_net's steps"
elif [[ -z $ncu ]]; then
  record profile_resnet20 "no profile" 0 "ncu not found (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute)"
else
  profile_step profile_resnet20 resnet20_fashion_mnist.toml 30000 500 --train-subset 30000
  profile_step profile_mnist fashion_mnist.toml 6000 240
fi

cat "$results/summary.md"
[[ $(overall_status) == pass ]]
