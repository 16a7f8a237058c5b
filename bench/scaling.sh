#!/usr/bin/env bash
# Two ranks against one on this machine, measured in one run (the machine is
# shared and noisy: only figures from the same run compare).
#
#   bench/scaling.sh [rounds] [seconds-per-run]
#
# 1. Throughput: `lockstep bench` of one model (default mnist_net, batch 64,
#    1 thread per rank) with 1 rank and with 2 ranks, alternating (1,2 then
#    2,1, ...), `rounds` times; prints every round's images/second and the
#    2-rank/1-rank ratio, then the medians and the median of the ratios.
# 2. Allreduce: `lockstep bench --allreduce` on 2 ranks: the fused-bucket
#    gradient reduction of mnist_net and alexnet_cifar against one plain
#    allreduce of the same bytes, for the bucket caps in $CAPS.
#
# Environment: LOCKSTEP (binary, default ./build/lockstep), MODEL, BATCH,
# THREADS, MPIEXEC (default mpiexec), BIND (extra mpiexec flags for the
# 2-rank runs, e.g. "-bind-to core"), CAPS (default "25 16 4"), REPEATS
# (allreduce repetitions, default 10), SKIP_ALLREDUCE=1 to skip part 2.
set -euo pipefail
cd "$(dirname "$0")/.."
lockstep=${LOCKSTEP:-./build/lockstep}
mpiexec=${MPIEXEC:-mpiexec}
model=${MODEL:-mnist_net}
batch=${BATCH:-64}
threads=${THREADS:-1}
rounds=${1:-5}
seconds=${2:-5}
read -r -a bind <<<"${BIND:-}"
read -r -a caps <<<"${CAPS:-25 16 4}"

images_per_second() {
  sed -n 's/.*"images_per_second": \([0-9.]*\).*/\1/p'
}
run() {  # run RANKS -> images/second
  local args=(bench --model "$model" --threads "$threads" --batch "$batch" --seconds "$seconds")
  if [ "$1" = 1 ]; then
    "$lockstep" "${args[@]}" | images_per_second
  else
    "$mpiexec" -n "$1" "${bind[@]}" "$lockstep" "${args[@]}" | images_per_second
  fi
}
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "throughput: $model, batch $batch per rank, $threads thread(s) per rank, ${seconds} s per run${BIND:+, 2 ranks with $BIND}"
printf '%5s %14s %14s %8s\n' round 1_rank_img/s 2_ranks_img/s ratio
ones=() twos=() ratios=()
for ((r = 1; r <= rounds; ++r)); do
  if ((r % 2)); then
    one=$(run 1)
    two=$(run 2)
  else
    two=$(run 2)
    one=$(run 1)
  fi
  ratio=$(awk -v a="$two" -v b="$one" 'BEGIN { printf "%.3f", a / b }')
  printf '%5d %14.1f %14.1f %8s\n' "$r" "$one" "$two" "$ratio"
  ones+=("$one") twos+=("$two") ratios+=("$ratio")
done
printf '%5s %14.1f %14.1f %8s\n' median "$(printf '%s\n' "${ones[@]}" | median)" \
  "$(printf '%s\n' "${twos[@]}" | median)" "$(printf '%s\n' "${ratios[@]}" | median)"

if [ "${SKIP_ALLREDUCE:-0}" = 1 ]; then exit 0; fi
echo
echo "allreduce: fused buckets (first 1 MiB) against one plain allreduce, 2 ranks, medians"
"$mpiexec" -n 2 "${bind[@]}" "$lockstep" bench --allreduce --model mnist_net alexnet_cifar \
  --bucket-cap-mb "${caps[@]}" --repeats "${REPEATS:-10}" | grep -v '^bench {'
