#!/bin/bash
#COBALT -n 4
#COBALT -t 1:00:00
#COBALT -q debug-cache-quad --attrs mcdram=cache:numa=quad
#COBALT -O lockstep-theta
# Theta (Cray XC40, KNL): Cobalt + aprun, CPU ranks. Submit from the
# repository root (flags on the qsub line override the header):
#   qsub -A <project> -n 8 jobs/theta.cobalt.sh configs/mnist.toml --epochs 32
# PROC_PER_NODE ranks per node, each bound (-cc depth) to DEPTH hardware
# threads, THREADS_PER_CORE per core, with lockstep running one thread per
# core of its affinity mask (DEPTH / THREADS_PER_CORE; --threads DEPTH in
# the options takes every hardware thread).
# A sweep inside one allocation (C.6 of the reference):
#   LAUNCHER='aprun -n {n} -N 4 -d 32 -j 2 -cc depth' jobs/scale.sh --config ...
# shellcheck source-path=SCRIPTDIR/..
set -euo pipefail
# shellcheck source=jobs/common.sh
source jobs/common.sh
job_arguments "$@"
ppn=${PROC_PER_NODE:-4} depth=${DEPTH:-32} smt=${THREADS_PER_CORE:-2}
whole_numbers PROC_PER_NODE="$ppn" DEPTH="$depth" THREADS_PER_CORE="$smt"
nodes=${COBALT_JOBSIZE:?not inside a Cobalt job (submit with qsub)}
launcher=(aprun -n $((nodes * ppn)) -N "$ppn" -d "$depth" -j "$smt" -cc depth
  -e OMP_NUM_THREADS="$depth" -e KMP_BLOCKTIME=0)
default_option device cpu
lockstep_train "$config" "${launcher[@]}" -- "${extra[@]}"
