#!/usr/bin/env bash
# The scaling study: the same experiment at each rank count, each from scratch
# in its own run directory OUT/nN, then OUT/scaling.md (the reference's table:
# time for E epochs, speedup, efficiency, final test accuracy, and where the
# time went), OUT/scaling.csv and OUT/scaling.png (speedup against ideal,
# drawn with gnuplot).
#   jobs/scale.sh --config configs/mnist.toml --ranks 1,2,4,8 --epochs 32 \
#                 [--out DIR] [LOCKSTEP_ARGS...]   e.g. --train-subset 6000
# Ranks start under a local mpiexec, or under LAUNCHER, a template in which
# {n} is the rank count (inside a batch job), e.g.
#   LAUNCHER='aprun -n {n} -N 4 -d 32 -j 2 -cc depth' jobs/scale.sh ...
# (an aprun's -N is held to {n}: ALPS refuses -N 4 with -n 1 or 2).
# Locally, rank counts above the core count run with --threads 1 and are
# marked oversubscribed. GPU runs on HPE Slingshot take NCCL through the
# aws-ofi-nccl plugin, as the site scripts do (jobs/common.sh:
# slingshot_nccl; SLINGSHOT=0: none). A rank count whose run fails is named
# in the table and the exit status (1); the others' rows are kept.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

config="" ranks="1,2,4,8" epochs="" out="" extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --config=* | --ranks=* | --epochs=* | --out=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    --config | --ranks | --epochs | --out)
      [ $# -ge 2 ] || die "$1 needs a value"
      declare "${1#--}=$2"
      shift 2
      ;;
    *) extra+=("$1") && shift ;;
  esac
done
[ -n "$config" ] || die "usage: $0 --config FILE [--ranks 1,2,4,8] [--epochs E] [--out DIR] [LOCKSTEP_ARGS...]"
[ -f "$config" ] || die "config file $config not found"
has_option run_dir "${extra[@]}" && die "--run-dir is set per rank count (OUT/nN); use --out"
if [ -z "$epochs" ]; then
  epochs=$(sed -n 's/^[[:space:]]*epochs[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "$config")
  epochs=${epochs:-10}
fi
name=$(basename "$config" .toml)
out=${out:-runs/scaling-$name}
cores=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
IFS=, read -ra rank_list <<<"$ranks"
for n in "${rank_list[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "--ranks takes positive numbers separated by commas, got '$ranks'"
done
command -v gnuplot >/dev/null || echo "scale: gnuplot not found, scaling.png will be missing (scripts/setup.sh installs gnuplot-nox)" >&2
mkdir -p "$out"
# shellcheck disable=SC2119  # the plugin's folders come from the environment
if [ "$(option_value device "${extra[@]}")" != cpu ]; then
  slingshot_nccl /soft/libraries/aws-ofi-nccl/v1.9.1-aws || true
fi

# One row per rank count, from the wall clock and rank 0's metrics.csv.
rows=() failed=()
for n in "${rank_list[@]}"; do
  run_dir=$out/n$n
  rm -rf "$run_dir"
  args=(--epochs "$epochs" --run-dir "$run_dir" --progress plain "${extra[@]}")
  note=""
  if [ -z "${LAUNCHER:-}" ]; then
    mpi_launcher "$n"
    if [ "$n" -gt "$cores" ]; then
      note="oversubscribed: $n ranks on $cores cores"
      has_option threads "${extra[@]}" || args+=(--threads 1)
    fi
  else
    read -ra launcher <<<"${LAUNCHER//\{n\}/$n}"
    aprun_fit_per_node  # aprun -n 1 -N 4 is refused: -N 1
  fi
  echo "scale: $n rank(s), $epochs epoch(s) ${note:+($note)}" >&2
  start=$(date +%s.%N)
  if ! LOG_DIR=$run_dir RESUME="" lockstep_train "$config" "${launcher[@]}" -- "${args[@]}"; then
    echo "scale: the run with $n rank(s) failed; its log is in $run_dir" >&2
    failed+=("$n")
    continue
  fi
  wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  # Columns by name (a missing one is an error, not a sum of $0); the last
  # test accuracy that was measured (nan: not evaluated that epoch).
  figures=$(awk -F, '
    NR == 1 {
      for (i = 1; i <= NF; i++) col[$i] = i
      split("seconds compute_s comm_wait_s eval_s data_s checkpoint_s test_accuracy", need, " ")
      for (i in need) if (!(need[i] in col)) { print "no column " need[i]; bad = 1; exit 1 }
      next
    }
    { s += $col["seconds"]; c += $col["compute_s"]; w += $col["comm_wait_s"]
      e += $col["eval_s"]; d += $col["data_s"]; k += $col["checkpoint_s"]
      if ($col["test_accuracy"] != "" && $col["test_accuracy"] != "nan") acc = $col["test_accuracy"] }
    END { if (!bad) printf "%.2f,%.4f,%.2f,%.2f,%.2f,%.2f,%.2f", s, acc, c, w, e, d, k }
  ' "$run_dir/metrics.csv") || die "$run_dir/metrics.csv: $figures"
  rows+=("$n,$wall,$figures,$note")
done
[ ${#rows[@]} -gt 0 ] || die "every run failed (ranks ${failed[*]}); their logs are in $out/n*"
base=${rows[0]%%,*}  # the rank count speedups are measured against

# scaling.csv with speedup and efficiency against the first rank count.
csv=$out/scaling.csv
{
  echo "ranks,wall_s,epoch_s,test_accuracy,compute_s,comm_wait_s,eval_s,data_s,checkpoint_s,note,speedup,efficiency"
  printf '%s\n' "${rows[@]}" | awk -F, -v OFS=, '
    NR == 1 { n0 = $1; t0 = $2 }
    { $11 = sprintf("%.3f", t0 / $2); $12 = sprintf("%.3f", (t0 / $2) / ($1 / n0)); print }'
} >"$csv"

{
  echo "# Scaling: $config, $epochs epochs"
  echo
  echo "$(hostname), $cores cores (load average $load at the start), lockstep $(git -C "$(dirname "${BASH_SOURCE[0]}")" describe --always --dirty 2>/dev/null || echo unknown), $(date -I)."
  echo "Extra arguments: ${extra[*]:-none}."
  echo
  echo "| ranks | time for $epochs epochs (s) | speedup | efficiency | test accuracy | epochs sum (s) | compute (s) | allreduce wait (s) | eval (s) | data (s) | checkpoint (s) | note |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  awk -F, 'NR > 1 { printf "| %d | %.1f | %.2f | %.0f%% | %.2f%% | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n",
    $1, $2, $11, 100 * $12, 100 * $4, $3, $5, $6, $7, $8, $9, $10 }' "$csv"
  echo
  echo "Time: wall time of the whole launch (start-up, data loading, training, evaluation,"
  echo "checkpoints); speedup and efficiency come from it, against $base rank(s)."
  echo "Epochs sum: metrics.csv \`seconds\` summed. Compute, allreduce wait (not hidden by"
  echo "backward), eval, data (waiting for the loader), checkpoint: rank 0's seconds summed."
  if [ ${#failed[@]} -gt 0 ]; then
    echo
    echo "**Failed:** the runs with ${failed[*]} rank(s) (their logs: $out/n<ranks>/)."
  fi
} >"$out/scaling.md"

if command -v gnuplot >/dev/null; then
  terminal=pngcairo
  gnuplot -e 'set terminal pngcairo' 2>/dev/null || terminal=png
  gnuplot <<EOF
set terminal $terminal noenhanced size 800,500
set output "$out/scaling.png"
set datafile separator ","
set title "lockstep scaling: $name, $epochs epochs"
set xlabel "ranks"
set ylabel "speedup (wall time)"
set logscale xy 2
set key left top
set grid
plot "$csv" every ::1 using 1:11:xtic(1) with linespoints lw 2 pt 7 title "measured", \
     "$csv" every ::1 using 1:(\$1 / $base) with lines dt 2 title "ideal"
EOF
fi
cat "$out/scaling.md"
[ ${#failed[@]} -eq 0 ] || die "the runs with ${failed[*]} rank(s) failed; the table has the others"
