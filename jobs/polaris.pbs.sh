#!/bin/bash -l
#PBS -l select=2:system=polaris
#PBS -l place=scatter
#PBS -l walltime=0:30:00
#PBS -l filesystems=home:eagle
#PBS -j oe
#PBS -r y
#PBS -q debug
# Polaris (4 A100 and 32 Milan cores per node): PBS Pro + Cray MPICH mpiexec,
# one rank per GPU, each on its own NUMA domain (--depth 8 --cpu-bind depth:
# lockstep starts one thread per core of its mask), GPUs assigned in reverse
# local-rank order by jobs/gpu_affinity.sh. Submit
# from the repository root (PBS passes no arguments and none of the
# submitting shell's variables: every setting goes through -v, DOCTOR=1,
# DEVICE, RANKS_PER_NODE, DEPTH, SLINGSHOT, LOCKSTEP, RESUME and LOG_DIR too):
#   qsub -A <project> -v CONFIG=configs/cifar10.toml,LOCKSTEP_ARGS="--epochs 32" jobs/polaris.pbs.sh
# GPU runs take NCCL over Slingshot with ALCF's settings (jobs/common.sh:
# slingshot_nccl; the plugin from AWS_OFI_NCCL_DIR, default ALCF's
# /soft/libraries/aws-ofi-nccl/v1.9.1-aws, with hwloc and
# NCCL_COLLNET_ENABLE=1 as ALCF's NCCL page has them; SLINGSHOT=0: none).
# shellcheck source-path=SCRIPTDIR/..
set -euo pipefail
cd "${PBS_O_WORKDIR:-.}"
# shellcheck source=jobs/common.sh
source jobs/common.sh
job_arguments "$@"
nodes=$(wc -l <"${PBS_NODEFILE:?not inside a PBS job (submit with qsub)}")
ppn=${RANKS_PER_NODE:-4} depth=${DEPTH:-8}
whole_numbers RANKS_PER_NODE="$ppn" DEPTH="$depth"
launcher=(mpiexec -n $((nodes * ppn)) --ppn "$ppn" --depth "$depth" --cpu-bind depth
  --env OMP_NUM_THREADS="$depth" jobs/gpu_affinity.sh)
default_option device "${DEVICE:-cuda}"
if [ "$(option_value device "${extra[@]}")" != cpu ] &&
  slingshot_nccl /soft/libraries/aws-ofi-nccl/v1.9.1-aws; then
  export NCCL_COLLNET_ENABLE="${NCCL_COLLNET_ENABLE-1}"
  if [ -d /soft/libraries/hwloc/lib ]; then export LD_LIBRARY_PATH="/soft/libraries/hwloc/lib:$LD_LIBRARY_PATH"; fi
fi
lockstep_train "$config" "${launcher[@]}" -- "${extra[@]}"
