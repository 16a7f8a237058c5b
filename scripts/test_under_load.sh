#!/usr/bin/env bash
# Runs the tests of build/ that wait on something (another process, a
# thread, a socket, a timeout) once more with a CPU hog on every core beside
# them (stress-ng): they must assert behaviour, never wall time. Tests that
# only compute get nothing from the hog but time, and are not run again.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v stress-ng >/dev/null || { echo "stress-ng not found (scripts/setup.sh --test)" >&2 && exit 1; }
# The fake clusters and the 2- and 3-rank suites; jobs that fail, stall,
# straggle or lose a peer; MPI start-up and shutdown; the threads (compute
# pool, loader, reduction thread, timeline); launchers and job scripts.
waiting=(cluster_ mpi_tests_ FailureEndToEnd Stall Straggler Liveness TrainMpi FinalizeWithin
  MpiCommunicator MpiEnvironment CpuThreadPool CpuThreads Loader ImageFolderLoad CommThreadQueue
  OverlapOnAndOff/ DistributedOptimizer HostReduction Timeline ThreadDeterminism Doctor
  JobPlacement Jobs. CudaPlugin FetchData ConfigErrors)
for name in "${waiting[@]}"; do
  if ctest --test-dir build -N -R "^$name" | grep -q '^Total Tests: 0$'; then
    echo "test_under_load: no test matches '^$name' (renamed? update scripts/test_under_load.sh)" >&2 && exit 1
  fi
done
stress-ng --cpu "$(nproc)" --timeout 3600s --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true' EXIT
# Every config file trained for an epoch: compute only, and the longest.
ctest --test-dir build --output-on-failure --no-tests=error -j 2 -R "^($(IFS='|' && echo "${waiting[*]}"))" \
  -E '^Jobs.EveryConfigTrainsOneEpoch$'
