#!/usr/bin/env bash
# Runs the tests of build/ that wait on something (another process, a
# thread, a socket, a timeout) once more with a CPU hog on every core beside
# them (stress-ng): they must assert behaviour, never wall time. Tests that
# only compute get nothing from the hog but time, and are not run again.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/test_names.sh
source scripts/test_names.sh
command -v stress-ng >/dev/null || { echo "stress-ng not found (scripts/setup.sh --test)" >&2 && exit 1; }
# The fake clusters and the 2- and 3-rank suites; jobs that fail, stall,
# straggle or lose a peer; MPI start-up and shutdown; the threads (compute
# pool, loader, reduction thread, timeline); launchers and job scripts.
waiting=(cluster_ mpi_tests_ FailureEndToEnd Stall Straggler Liveness TrainMpi FinalizeWithin
  MpiCommunicator MpiEnvironment CpuThreadPool CpuThreads Loader ImageFolderLoad CommThreadQueue
  OverlapOnAndOff/ DistributedOptimizer HostReduction Timeline ThreadDeterminism Doctor
  JobPlacement Jobs. CudaPlugin FetchData ConfigErrors)
require_tests build "${waiting[@]}"
stress-ng --cpu "$(nproc)" --timeout 3600s --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true' EXIT
# Every config file trained for an epoch: compute only, and the longest.
ctest --test-dir build --output-on-failure --no-tests=error -j 2 -R "$(names_regex "${waiting[@]}")" \
  -E '^Jobs/EveryConfig\.'
