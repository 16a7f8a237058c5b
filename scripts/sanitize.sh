#!/usr/bin/env bash
# Builds lockstep (CPU only) with sanitizers and runs tests under them:
#   scripts/sanitize.sh address,undefined  # unit tests and the 2- and 3-rank suites
#                                          # (clang; also builds the fuzz targets)
#   scripts/sanitize.sh thread             # threaded and multi-rank tests (TSan)
# Build directory: build-asan or build-tsan. A report fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/test_names.sh
source scripts/test_names.sh
lane=${1:?usage: scripts/sanitize.sh address,undefined|thread}
targets=(lockstep lockstep_tests lockstep_mpi_tests lockstep_failure_helper)
case $lane in
  address,undefined)
    dir=build-asan
    # clang, so that the same build serves the libFuzzer targets.
    extra=(-DCMAKE_CXX_COMPILER=clang++ -DLOCKSTEP_FUZZ=ON)
    targets+=(fuzz_idx fuzz_cifar10 fuzz_checkpoint fuzz_config fuzz_layers fuzz_image fuzz_safetensors)
    selections=()
    files=()
    # What these add under ASan is their time, not memory checks: training
    # runs judged on what they learn or print (TrainE2E and TrainBf16 learn,
    # the README's commands, the zoo on 1-3 threads: TSan runs it), a look
    # inside the binary (CpuIsaBinary, CpuBaseline), the AlexNet interop
    # tests, whose lockstep side the MnistNet and ResNet-20 ones run too, the
    # deeper and wider CIFAR ResNets' experiment files (their blocks are
    # resnet20's; the wide layers' kernel paths are in CpuWinograd's and
    # CpuConv's shapes), the stragglers (processes slowed down on purpose:
    # they run in the plain and loaded lanes, as the fake clusters do), and
    # the tests that run no lockstep code at all (the format and shellcheck
    # passes, the GPU check's bash rules, its PyTorch script, the Winograd
    # error study's transforms: bench/winograd_error, not built here).
    skip=(cluster_ Readme.EveryCommandRuns$ TrainE2E.MnistNetLearnsOnAFashionMnistSubset$
      TrainBf16.LossTracksFp32$ ThreadDeterminism.ZooModels CpuIsaBinary. CpuBaseline.
      Interop.AlexnetCifar "Jobs/EveryConfig.TrainsOneEpoch/resnet(18|44|56|110)_cifar10( |$)"
      StragglerE2E. Style. Jobs.EveryScriptPassesBashNAndShellcheck$ gpu_check_lib$
      torch_reference_script$ winograd_error_transforms$)
    ;;
  thread)
    dir=build-tsan
    # File by file (no unity batches): the one build that compiles each
    # library source alone, so a missing #include that a batch hides fails
    # here (LOCKSTEP_UNITY_BUILD=OFF is a supported build).
    extra=(-DCMAKE_CXX_COMPILER=clang++ -DLOCKSTEP_UNITY_BUILD=OFF)
    # Threads: the compute pool, the batch loader, parallel image decoding,
    # the gradient reduction thread with overlap on and off, the stall
    # watchdog, the timeline; ranks: the 2- and 3-rank suites, multi-rank
    # training runs and the failure jobs.
    selections=(CpuThreadPool CpuThreads Loader ImageFolderLoad CommThreadQueue OverlapOnAndOff/
      DistributedOptimizer HostReduction GradientBuckets Configs/SizeOne Stall Timeline
      ThreadDeterminism FailureEndToEnd TrainMpi mpi_tests_)
    # The test files those are in: only they are built.
    files=(test_cpu_thread_pool.cpp test_cpu_threads.cpp test_data_loader.cpp test_image_folder.cpp
      test_comm_thread.cpp test_device_reduction.cpp test_distributed_optimizer.cpp
      test_host_reduction.cpp test_bucket_verify.cpp test_bucket_layout.cpp test_failure.cpp
      test_stall.cpp test_stall_exemption.cpp test_stall_schedule.cpp test_timeline.cpp
      test_timeline_report.cpp test_thread_determinism.cpp test_train_mpi.cpp)
    skip=(cluster_)
    ;;
  *) echo "sanitize: unknown lane '$lane' (address,undefined or thread)" >&2 && exit 2 ;;
esac
# Line tables only: reports still name file and line, and the build is a
# quarter faster than with full debug information. (The test files
# themselves build at -O0: LOCKSTEP_TEST_OPT, tests/CMakeLists.txt.)
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKSTEP_CUDA=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DLOCKSTEP_TEST_FILES="$(IFS=';' && echo "${files[*]}")" \
  -DLOCKSTEP_SANITIZE="$lane" "${extra[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}"
# The interoperability tests' Python (scripts/setup_test_deps.sh made it for build/).
[ -d build/pyenv ] && ln -sfn "$PWD/build/pyenv" "$dir/pyenv"
# MPICH is not built with the sanitizers: what it allocates once and keeps
# (tests/lsan.supp) and its own synchronisation (tests/tsan.supp) are known.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# TSan does not see MPI's reads of a gradient bucket: the trainer checks them
# itself (distributed/host_reduction.h, verify_unchanged).
if [ "$lane" = thread ]; then export LOCKSTEP_VERIFY_BUCKETS=1; fi
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
# Each name the lane selects or leaves out must still name a test.
require_tests "$dir" "${selections[@]}" "${skip[@]}"
tests=""
if [ ${#selections[@]} -gt 0 ]; then tests=$(names_regex "${selections[@]}"); fi
# The fake-cluster jobs (tests/cluster/) test processes and networks, not
# memory: they run in the plain and loaded lanes, not again here.
ctest --test-dir "$dir" --output-on-failure --no-tests=error -j 2 -E "$(names_regex "${skip[@]}")" \
  ${tests:+-R "$tests"}
