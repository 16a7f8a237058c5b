#!/usr/bin/env bash
# Runs "$@" seeing one GPU, chosen by the rank's node-local index: the wrapper
# ALCF uses on Polaris (set_affinity_gpu_polaris.sh). GPU_ORDER=reverse (the
# default, for Polaris's CPU/NUMA-to-GPU layout) gives local rank 0 the last
# GPU; GPU_ORDER=forward gives it GPU 0. GPUS_PER_NODE default: nvidia-smi -L.
set -euo pipefail
local_rank=${PMI_LOCAL_RANK:-${PALS_LOCAL_RANKID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${SLURM_LOCALID:-0}}}}}
num_gpus=${GPUS_PER_NODE:-$(nvidia-smi -L 2>/dev/null | wc -l)}
if [ "$num_gpus" -lt 1 ]; then
  echo "gpu_affinity.sh: no GPU found on $(hostname) (nvidia-smi -L lists none)" >&2
  exit 1
fi
if [ "${GPU_ORDER:-reverse}" = reverse ]; then
  gpu=$((num_gpus - 1 - local_rank % num_gpus))
else
  gpu=$((local_rank % num_gpus))
fi
export CUDA_VISIBLE_DEVICES=$gpu
exec "$@"
