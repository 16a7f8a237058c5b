#!/usr/bin/env bash
# What the liveness heartbeat costs: the same 2-rank training run with the
# heartbeat on (the default, liveness_timeout_s = 15) and off (0), measured
# alternately in one run (the machine is shared and noisy; compare only
# figures from the same run).
#
#   bench/liveness_cost.sh [REPEATS] [LAUNCHER...]
#     e.g. bench/liveness_cost.sh 5
#          bench/liveness_cost.sh 5 scripts/fake_cluster.sh mpiexec -n 2 -r 1 --
# Prints the training images/second of every run (rank 0's metrics.csv, the
# epochs after the first) and the median of each mode.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
shift || true
launcher=("$@")
[ ${#launcher[@]} -gt 0 ] || launcher=(mpiexec -n 2)
lockstep=${LOCKSTEP:-./build/lockstep}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Images/second over epochs 2.. of one run.
run() {
  local timeout=$1 dir=$work/run$RANDOM
  "${launcher[@]}" "$lockstep" train --config configs/fashion_mnist.toml --epochs 4 \
    --train-subset 16384 --test-subset 1000 --threads 1 --progress none --checkpoint-every 0 \
    --liveness-timeout-s "$timeout" --run-dir "$dir" >/dev/null
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    NR > 2 { n += $col["train_samples"]; s += $col["seconds"] }
    END { printf "%.0f\n", n / s }' "$dir/metrics.csv"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

on=() off=()
for ((i = 1; i <= repeats; i++)); do
  on+=("$(run 15)")
  off+=("$(run 0)")
  echo "repeat $i: heartbeat on ${on[-1]} img/s, off ${off[-1]} img/s"
done
m_on=$(printf '%s\n' "${on[@]}" | median)
m_off=$(printf '%s\n' "${off[@]}" | median)
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
awk -v a="$m_on" -v b="$m_off" 'BEGIN { printf "median: heartbeat on %.0f img/s, off %.0f img/s, on/off %.3f\n", a, b, a / b }'
