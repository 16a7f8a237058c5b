#!/usr/bin/env bash
# One rank under a stand-in launcher (tests/launchers/): started by MPICH's
# mpiexec, it sets the launcher's local-rank variable, the GPUs of its task
# and binds it to its CPUs as the real launcher would, then runs the program.
#   rank.sh CPUS_PER_RANK GPUS_PER_RANK LOCAL_RANK_VARIABLE PROGRAM [ARGS...]
# CPUS_PER_RANK 0: no binding; GPUS_PER_RANK 0: CUDA_VISIBLE_DEVICES untouched.
set -euo pipefail
cpus=$1 gpus=$2 variable=$3
shift 3
local_rank=${MPI_LOCALRANKID:?rank.sh runs under MPICH mpiexec}
export "$variable=$local_rank"
if [ "$gpus" -gt 0 ]; then
  CUDA_VISIBLE_DEVICES=$(seq -s, $((local_rank * gpus)) $((local_rank * gpus + gpus - 1)))
  export CUDA_VISIBLE_DEVICES
fi
if [ "$cpus" -gt 0 ]; then
  exec taskset -c "$((local_rank * cpus))-$((local_rank * cpus + cpus - 1))" "$@"
fi
exec "$@"
