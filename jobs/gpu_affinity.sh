#!/usr/bin/env bash
# Runs "$@" seeing one GPU, chosen by the rank's node-local index: the wrapper
# ALCF uses on Polaris (set_affinity_gpu_polaris.sh), used on Slurm too
# (jobs/slurm.sbatch.sh). GPU_ORDER=reverse (the default, for the CPU/NUMA-
# to-GPU layout of Polaris and Perlmutter, where GPU 3 is nearest to cores
# 0-15) gives local rank 0 the last GPU; GPU_ORDER=forward gives it GPU 0.
# The GPUs to choose from: those in CUDA_VISIBLE_DEVICES when the scheduler
# has set it (a share of the node, or all of its GPUs), else GPUS_PER_NODE,
# else the node's GPUs (nvidia-smi, one line each, MIG instances not counted).
# None: an error, but for a command with --device auto, which runs as it is.
set -euo pipefail
local_rank=${PMI_LOCAL_RANK:-${PALS_LOCAL_RANKID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${SLURM_LOCALID:-0}}}}}
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a gpus <<<"$CUDA_VISIBLE_DEVICES"
else
  num=${GPUS_PER_NODE:-$({ nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null || true; } | wc -l)}
  gpus=()
  for ((i = 0; i < num; i++)); do gpus+=("$i"); done
fi
num_gpus=${#gpus[@]}
# The lockstep command's --device (its last one; the job scripts always give one).
device=""
for ((i = 1; i <= $#; i++)); do
  case ${!i} in
    --device=*) device=${!i#--device=} ;;
    --device) next=$((i + 1)) && device=${!next:-} ;;
  esac
done
# --device auto: with no GPU here the rank runs as lockstep chooses, on the CPU.
if [ "$num_gpus" -lt 1 ] && [ "$device" = auto ]; then exec "$@"; fi
if [ "$num_gpus" -lt 1 ]; then
  echo "gpu_affinity.sh: no GPU found on $(hostname) (CUDA_VISIBLE_DEVICES unset, nvidia-smi lists none)" >&2
  exit 1
fi
if [ "${GPU_ORDER:-reverse}" = reverse ]; then
  index=$((num_gpus - 1 - local_rank % num_gpus))
else
  index=$((local_rank % num_gpus))
fi
export CUDA_VISIBLE_DEVICES=${gpus[index]}
exec "$@"
