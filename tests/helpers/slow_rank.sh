#!/bin/sh
# Runs one rank of a job with one rank made slow by a CPU hog, for the
# straggler tests (tests/test_straggler_e2e.cpp):
#   mpiexec -n N tests/helpers/slow_rank.sh SLOW_RANK CMD...
# Rank SLOW_RANK (from MPICH's PMI_RANK) runs CMD pinned to the last CPU at
# nice 10 beside a busy loop pinned to that CPU, so it gets a small share of
# one CPU however loaded the machine is; the other ranks run CMD pinned to
# CPU 0 at the default priority. The busy loop ends with CMD (or a signal).
# Exits with CMD's status.
set -eu
slow=$1
shift
last_cpu=$(($(nproc) - 1))
if [ "${PMI_RANK:-0}" != "$slow" ]; then
  exec taskset -c 0 "$@"
fi
taskset -c "$last_cpu" sh -c 'while :; do :; done' &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
status=0
nice -n 10 taskset -c "$last_cpu" "$@" || status=$?
exit "$status"
