#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH -t 00:30:00
#SBATCH -J lockstep
#SBATCH -o lockstep-%j.out
# Slurm: srun starts one rank per task (Slurm gives each its own GPU and
# cpus-per-task cores: since Slurm 22.05 srun does not inherit
# --cpus-per-task, so it is passed as -c; lockstep starts one thread per CPU
# of its task). Submit from the repository root, adding what the site needs
# (-A account, -q qos, -C gpu on Perlmutter, --mpi=pmi2 in SRUN_ARGS):
#   sbatch -A <account> -C gpu jobs/slurm.sbatch.sh configs/cifar10.toml --epochs 32
# CPU-only nodes: sbatch --gpus-per-task=0 and DEVICE=cpu. GPU runs on HPE
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
launcher=(srun --cpu-bind=cores -c "$SRUN_CPUS_PER_TASK" "${srun_args[@]}")
default_option device "${DEVICE:-cuda}"
# shellcheck disable=SC2119  # the plugin's folders come from the environment
if [ "$(option_value device "${extra[@]}")" != cpu ]; then slingshot_nccl || true; fi
lockstep_train "$config" "${launcher[@]}" -- "${extra[@]}"
