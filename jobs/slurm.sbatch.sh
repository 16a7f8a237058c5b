#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --gpus-per-node=4
#SBATCH -t 00:30:00
#SBATCH -J lockstep
#SBATCH -o lockstep-%j.out
# Slurm, set for Perlmutter's GPU nodes (64 cores of 2 hardware threads, 4
# A100): one rank per GPU. srun gives each task cpus-per-task CPUs bound to
# whole cores (-c 32 --cpu-bind=cores, NERSC's 2 x floor(64 / ranks per
# node): a NUMA domain each; since Slurm 22.05 srun does not inherit
# --cpus-per-task, so it is passed as -c; lockstep starts one thread per core
# of its task: 16 for -c 32) and all of its node's GPUs (--gpus-per-node, --gpu-bind=none:
# GPUs that Slurm binds to tasks, by --gpus-per-task or another --gpu-bind,
# are fenced off from the other tasks by cgroups, which breaks CUDA IPC
# between the ranks of a node, NCCL's path over NVLink). jobs/gpu_affinity.sh
# then gives each rank one of them by SLURM_LOCALID, in reverse order
# (GPU_ORDER, default reverse: on Perlmutter GPU 3 is the nearest to cores
# 0-15, as on Polaris; GPU_ORDER=forward: local rank 0 takes GPU 0). Submit
# from the repository root, adding what the site needs (-A account, -q qos,
# -C gpu on Perlmutter, --mpi=pmi2 in SRUN_ARGS; other nodes: --cpus-per-task
# and --gpus-per-node on the sbatch line):
#   sbatch -A <account> -C gpu jobs/slurm.sbatch.sh configs/cifar10.toml --epochs 32
# CPU-only nodes: sbatch --gpus-per-node=0 and DEVICE=cpu (DEVICE=auto: a
# node's GPUs where it has them, else its CPU). GPU runs on HPE
# Slingshot take NCCL through the aws-ofi-nccl plugin when it is found (the
# site's module on LD_LIBRARY_PATH, or AWS_OFI_NCCL_DIR), with HPE's settings
# (jobs/common.sh: slingshot_nccl; SLINGSHOT=0: none).
# shellcheck source-path=SCRIPTDIR/..
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
# shellcheck source=jobs/common.sh
source jobs/common.sh
job_arguments "$@"
read -ra srun_args <<<"${SRUN_ARGS:-}"
export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-1}
launcher=(srun -c "$SRUN_CPUS_PER_TASK" --cpu-bind=cores "${srun_args[@]}")
default_option device "${DEVICE:-cuda}"
if [ "$(option_value device "${extra[@]}")" != cpu ]; then
  launcher=(srun -c "$SRUN_CPUS_PER_TASK" --cpu-bind=cores --gpu-bind=none "${srun_args[@]}" jobs/gpu_affinity.sh)
  # shellcheck disable=SC2119  # the plugin's folders come from the environment
  slingshot_nccl || true
fi
lockstep_train "$config" "${launcher[@]}" -- "${extra[@]}"
