#!/bin/bash
#COBALT -n 1
#COBALT -t 1:00:00
#COBALT -q full-node
#COBALT -O lockstep-thetagpu
# ThetaGPU (DGX A100, 8 GPUs per node): Cobalt + Open MPI mpirun, one rank
# per GPU. Submit from the repository root:
#   qsub -A <project> -n 2 jobs/thetagpu.cobalt.sh configs/cifar10.toml --epochs 32
# Set the environment lockstep was built with (modules) before submitting.
# Open MPI's mpirun gives the ranks on nodes other than its own only the
# variables it names with -x; it names each of these that is set: PATH,
# LD_LIBRARY_PATH, VIRTUAL_ENV and CONDA_PREFIX (where lockstep looks for
# pip's CUDA libraries), GPUS_PER_NODE and GPU_ORDER (jobs/gpu_affinity.sh),
# and every LOCKSTEP_*, NCCL_*, CUDA_*, OMP_* and UCX_* variable.
# shellcheck source-path=SCRIPTDIR/..
set -euo pipefail
# shellcheck source=jobs/common.sh
source jobs/common.sh
job_arguments "$@"
gpus=${GPUS_PER_NODE:-8}
whole_numbers GPUS_PER_NODE="$gpus"
nodes=$(wc -l <"${COBALT_NODEFILE:?not inside a Cobalt job (submit with qsub)}")
export GPUS_PER_NODE=$gpus GPU_ORDER=${GPU_ORDER:-forward}
forward=()
for name in $(compgen -e | LC_ALL=C sort); do
  case $name in
    PATH | LD_LIBRARY_PATH | VIRTUAL_ENV | CONDA_PREFIX | GPUS_PER_NODE | GPU_ORDER | \
      LOCKSTEP_* | NCCL_* | CUDA_* | OMP_* | UCX_*) forward+=(-x "$name") ;;
  esac
done
launcher=(mpirun -np $((nodes * gpus)) -npernode "$gpus" --hostfile "$COBALT_NODEFILE"
  --bind-to none "${forward[@]}" jobs/gpu_affinity.sh)
default_option device "${DEVICE:-cuda}"
lockstep_train "$config" "${launcher[@]}" -- "${extra[@]}"
