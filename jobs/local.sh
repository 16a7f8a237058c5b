#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Runs lockstep on this machine under mpiexec (MPICH or Open MPI), logged,
# continuing from the run's newest checkpoint when there is one.
#   jobs/local.sh RANKS CONFIG [LOCKSTEP_ARGS...]
#   jobs/local.sh 4 configs/fashion_mnist.toml --epochs 2
# Environment: LOCKSTEP (default ./build/lockstep), LOG_DIR (default: the run
# directory), RESUME (default auto).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ $# -ge 2 ] || die "usage: $0 RANKS CONFIG [LOCKSTEP_ARGS...]"
ranks=$1 config=$2
shift 2
[[ $ranks =~ ^[1-9][0-9]*$ ]] || die "RANKS must be a positive number, got '$ranks'"
command -v mpiexec >/dev/null || die "mpiexec not found (scripts/setup.sh installs MPICH)"

mpi_launcher "$ranks"
lockstep_train "$config" "${launcher[@]}" -- "$@"
