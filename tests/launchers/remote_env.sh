#!/usr/bin/env bash
# Runs a rank's program with the environment it has on a node other than the
# launcher's under Open MPI's mpirun: the variables NAMEd (mpirun -x), the
# launcher's own (OMPI_*, PMIX_*; here also MPICH's PMI_*, MPI_LOCAL*,
# HYDI_* and MPIR_CVAR_*, that start the ranks of the stand-ins), a login's
# (HOME, USER, LOGNAME, SHELL) and the test build's sanitizer settings
# (*SAN_OPTIONS); none of the submitting shell's others.
#   remote_env.sh [NAME...] -- PROGRAM [ARGS...]
set -euo pipefail
keep=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  if [ -n "${!1+set}" ]; then keep+=("$1=${!1}"); fi
  shift
done
[ $# -gt 1 ] || { echo "usage: remote_env.sh [NAME...] -- PROGRAM [ARGS...]" >&2 && exit 2; }
shift
for name in $(compgen -e); do
  case $name in
    OMPI_* | PMIX_* | PMI_* | MPI_LOCAL* | HYDI_* | MPIR_CVAR_* | HOME | USER | LOGNAME | SHELL | *SAN_OPTIONS)
      keep+=("$name=${!name}")
      ;;
  esac
done
exec env -i "${keep[@]}" "$@"
