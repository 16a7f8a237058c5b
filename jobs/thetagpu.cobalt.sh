#!/bin/bash
#COBALT -n 1
#COBALT -t 1:00:00
#COBALT -q full-node
#COBALT -O lockstep-thetagpu
# ThetaGPU (DGX A100, 8 GPUs per node): Cobalt + Open MPI mpirun, one rank
# per GPU. Submit from the repository root:
#   qsub -A <project> -n 2 jobs/thetagpu.cobalt.sh configs/cifar10.toml --epochs 32
# Set the environment lockstep was built with (modules) before submitting:
# PATH and LD_LIBRARY_PATH are passed to every rank.
# shellcheck source-path=SCRIPTDIR/..
set -euo pipefail
# shellcheck source=jobs/common.sh
source jobs/common.sh
job_arguments "$@"
gpus=${GPUS_PER_NODE:-8}
nodes=$(wc -l <"${COBALT_NODEFILE:?not inside a Cobalt job (submit with qsub)}")
export GPUS_PER_NODE=$gpus GPU_ORDER=${GPU_ORDER:-forward}
launcher=(mpirun -np $((nodes * gpus)) -npernode "$gpus" --hostfile "$COBALT_NODEFILE"
  --bind-to none -x PATH -x LD_LIBRARY_PATH -x GPUS_PER_NODE -x GPU_ORDER jobs/gpu_affinity.sh)
default_option device "${DEVICE:-cuda}"
lockstep_train "$config" "${launcher[@]}" -- "${extra[@]}"
