#!/usr/bin/env bash
# A launcher that fails for one rank count (for jobs/scale.sh's LAUNCHER):
#   fail_for_ranks.sh N FAIL_N CMD...   exits 3 when N = FAIL_N, else runs CMD.
set -euo pipefail
n=${1:?usage: fail_for_ranks.sh N FAIL_N CMD...}
fail_n=${2:?usage: fail_for_ranks.sh N FAIL_N CMD...}
shift 2
if [ "$n" = "$fail_n" ]; then
  echo "fail_for_ranks: refusing $n ranks" >&2
  exit 3
fi
exec "$@"
