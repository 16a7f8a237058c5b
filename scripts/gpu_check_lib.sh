# shellcheck shell=bash
# Globals shared with gpu_check.sh (set there, or set here for it to read):
# shellcheck disable=SC2034,SC2154
# Helpers of gpu_check.sh (sourced): steps under a timeout and a deadline,
# the gtest XML counts, the summary (summary.md and summary.json, rewritten
# after every step so that a run cut short still reports).
#
# Globals the caller sets: results (folder), deadline (epoch seconds).
# A step's status is one of: pass, fail, timeout, refused (failures); "no
# GPU" (a dry run); "no time" (not started: less than half its limit was
# left of the budget), "no torch", unsupported (the tool refused the device):
# not run here, so the check is incomplete.

step_names=() step_status=() step_seconds=() step_detail=()
declare -A metric=()

# run_logged NAME SECONDS CMD...: runs CMD with its output in
# $results/NAME.log under a timeout cut to the deadline; sets run_rc (124 on
# timeout, 125 when not started: less than half of SECONDS left, or stopped
# at the deadline when its limit had been cut to it: the budget ran out,
# the step did not fail) and run_seconds. Never fails itself.
run_logged() {
  local name=$1 limit=$2 left start cut=0
  shift 2
  left=$((deadline - $(date +%s)))
  start=$(date +%s.%N)
  if ((left < (limit + 1) / 2)); then
    echo "gpu_check: $left s left of the budget, $name needs up to $limit s: not started" \
      >"$results/$name.log"
    run_rc=125
  else
    ((left < limit)) && limit=$left cut=1
    run_rc=0
    timeout --kill-after=10 "$limit" "$@" >"$results/$name.log" 2>&1 || run_rc=$?
    if ((cut && (run_rc == 124 || run_rc == 137))); then
      echo "gpu_check: stopped at the end of the budget ($limit s were left of it): no time" \
        >>"$results/$name.log"
      run_rc=125
    fi
  fi
  run_seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
}

# pack_results DIR: summary.md, summary.json and results.tar.xz (every log,
# XML and metrics.csv; no checkpoints, weights or images) into DIR: three
# files at its top, what a machine that returns only a few files, two
# folders deep, can send back. Without the xz program (tar -J calls it):
# results.tar.gz.
pack_results() {
  local into=$1 compress=-J ext=xz
  local skip=(--exclude='*.lsck' --exclude='*.safetensors' --exclude='*.png' --exclude='tensorboard')
  [[ -n $into ]] || return 0
  mkdir -p "$into" || return 0
  cp "$results/summary.md" "$results/summary.json" "$into/" 2>/dev/null || true
  command -v xz >/dev/null 2>&1 || compress=-z ext=gz
  # DIR itself is left out where it lies inside the results: tar reading
  # the archive it is writing fails now and then ("file changed as we read it").
  case $into in
    "$results"/*) skip+=(--exclude="$(basename "$results")/${into#"$results"/}") ;;
  esac
  if tar -C "$(dirname "$results")" "$compress" -cf "$into/results.tar.$ext.part" "${skip[@]}" \
    "$(basename "$results")" 2>/dev/null; then
    mv -f "$into/results.tar.$ext.part" "$into/results.tar.$ext" || true
  fi
  rm -f "$into/results.tar.$ext.part" || true
}

# unpack_archive ARCHIVE DIR [PYTHON]: a .tar.xz into DIR, by tar with the
# xz program, or, on a machine without it, by PYTHON's tarfile (which reads
# xz itself). Fails when neither can.
unpack_archive() {
  if command -v xz >/dev/null 2>&1; then
    tar -C "$2" -xJf "$1"
  elif [[ -n ${3:-} ]]; then
    "$3" -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    kw = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
    t.extractall(sys.argv[2], **kw)' "$1" "$2"
  else
    echo "gpu_check: cannot unpack $1: no xz program and no Python" >&2
    return 1
  fi
}

# record NAME STATUS SECONDS DETAIL: adds a step and rewrites the summary,
# and packs it with the logs so far into the pack folder (so that a check
# killed before its exit trap still sends back every finished step's log).
record() {
  step_names+=("$1") step_status+=("$2") step_seconds+=("$3") step_detail+=("$4")
  printf 'gpu_check: %-16s %-8s %6s s  %s\n' "$1" "$2" "$3" "$4" >&2
  write_summary
  pack_results "${pack:-}"
}

# status_of RC: pass, timeout (124, 137), no time (125) or fail.
status_of() {
  case $1 in
    0) echo pass ;;
    124 | 137) echo timeout ;;
    125) echo "no time" ;;
    *) echo fail ;;
  esac
}

# xml_counts FILE: sets xml_tests, xml_failures (tests that failed, not
# their failure messages: gtest writes one <failure> per failed assertion),
# xml_failed_names (the first three, Suite.Name, comma-separated),
# xml_skipped and xml_skip_text (the distinct skip messages, without gtest's
# file:line, one a line) from a gtest XML report.
xml_counts() {
  xml_tests=0 xml_failures=0 xml_failed_names="" xml_skipped=0 xml_skip_text=""
  [[ -f $1 ]] || return 0
  xml_tests=$(grep -c '<testcase ' "$1" || true)
  local failed
  failed=$(awk '/<testcase /{ name = $0; sub(/.* name="/, "", name); sub(/".*/, "", name)
                              suite = $0; sub(/.* classname="/, "", suite); sub(/".*/, "", suite) }
                /<failure /{ if (!(suite "." name in seen)) { seen[suite "." name] = 1; print suite "." name } }' "$1")
  [[ -z $failed ]] || xml_failures=$(wc -l <<<"$failed")
  xml_failed_names=$(head -n3 <<<"$failed" | paste -sd, | sed 's/,/, /g')
  xml_skipped=$(grep -c 'result="skipped"' "$1" || true)
  xml_skip_text=$(grep -o '<skipped message="[^"]*"' "$1" |
    sed 's/^<skipped message="//; s/"$//; s/^[^&]*&#x0A;//; s/&#x0A;/ /g' |
    sed 's/&quot;/"/g; s/&apos;/'"'"'/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g' | sort -u || true)
}

json_string() {
  local s=$1
  s=${s//\\/\\\\} s=${s//\"/\\\"} s=${s//$'\n'/\\n} s=${s//$'\t'/ }
  printf '"%s"' "$s"
}

# fail when a step failed; else incomplete when a step could not run here;
# else pass.
overall_status() {
  local s overall=pass
  for s in "${step_status[@]}"; do
    case $s in
      pass | "no GPU" | "no profile") ;;  # a profile informs; it cannot fail the check
      "no time" | "no torch" | unsupported) overall=incomplete ;;
      *) echo fail && return ;;
    esac
  done
  echo "$overall"
}

write_summary() {
  local i key first=1 overall
  overall=$(overall_status)
  {
    echo "# lockstep GPU check: $overall"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n); mode: $mode; bundle: $bundle_version"
    echo
    echo "| step | status | seconds | detail |"
    echo "|---|---|---|---|"
    for i in "${!step_names[@]}"; do
      echo "| ${step_names[i]} | ${step_status[i]} | ${step_seconds[i]} | ${step_detail[i]//|/\\|} |"
    done
    if ((${#metric[@]})); then
      echo
      echo "| metric | value |"
      echo "|---|---|"
      for key in $(printf '%s\n' "${!metric[@]}" | sort); do echo "| $key | ${metric[$key]} |"; done
    fi
    echo
    echo "Logs, gtest XML and metrics.csv files: $results"
  } >"$results/summary.md"
  {
    printf '{"status": %s, "mode": %s, "bundle": %s, "steps": [' "$(json_string "$overall")" \
      "$(json_string "$mode")" "$(json_string "$bundle_version")"
    for i in "${!step_names[@]}"; do
      ((i)) && printf ', '
      printf '{"name": %s, "status": %s, "seconds": %s, "detail": %s}' \
        "$(json_string "${step_names[i]}")" "$(json_string "${step_status[i]}")" \
        "${step_seconds[i]}" "$(json_string "${step_detail[i]}")"
    done
    printf '], "metrics": {'
    for key in $(printf '%s\n' "${!metric[@]}" | sort); do
      ((first)) || printf ', '
      first=0
      printf '%s: %s' "$(json_string "$key")" "$(json_string "${metric[$key]}")"
    done
    printf '}}\n'
  } >"$results/summary.json"
}

# metrics_summary CSV: sets csv_summary ("acc ACC% last5 ACC5% img/s IPS
# epochs N train_s SECONDS": the last epoch's test accuracy, the mean of the
# last five epochs' (fewer when fewer ran), mean images/s, summed epoch
# seconds), csv_accuracy and csv_accuracy_last5 (percent; empty without a
# metrics row).
metrics_summary() {
  csv_accuracy="" csv_accuracy_last5="" csv_summary="no metrics.csv"
  [[ -f $1 ]] || return 0
  csv_accuracy=$(awk -F, 'NR > 1 { a = $7 } END { if (NR > 1) printf "%.2f", 100 * a }' "$1")
  csv_accuracy_last5=$(awk -F, 'NR > 1 { a[NR] = $7 }
    END { for (r = NR; r > 1 && r > NR - 5; r--) { s += a[r]; n++ }
          if (n) printf "%.2f", 100 * s / n }' "$1")
  csv_summary=$(awk -F, -v l5="$csv_accuracy_last5" 'NR > 1 { s += $9; i += $10; n++; a = $7 }
    END { if (n) printf "acc %.2f%% last5 %s%% img/s %.0f epochs %d train_s %.1f",
          100 * a, l5, i / n, n, s }' "$1")
}

# repeat_step NAME CONFIG FLAGS...: two runs of `$lockstep train` on
# configs/CONFIG (under $root) with deterministic = true, then their
# model.safetensors compared byte for byte; records NAME pass when they are
# the same, fail (naming the first difference) when not or when a run failed.
repeat_step() {
  local name=$1 config=$2 run first=""
  shift 2
  for run in 1 2; do
    rm -rf "${results:?}/${name}_$run"
    run_logged "$name" 60 "$lockstep" train --config "$root/configs/$config" --data-dir "$root/data" \
      --run-dir "$results/${name}_$run" --checkpoint-every 0 --deterministic true "$@"
    ((run_rc == 0)) || break
    cp "$results/$name.log" "$results/${name}_$run.log"
  done
  status=$(status_of "$run_rc")
  detail="two runs with the same seed"
  if [[ $status != pass ]]; then
    detail+=": run $run ended: $(tail -n1 "$results/$name.log")"
  elif ! cmp -s "$results/${name}_1/model.safetensors" "$results/${name}_2/model.safetensors"; then
    status=fail
    # (cmp exits 1 on a difference: || true, or set -e would end the check here)
    first=$(cmp "$results/${name}_1/model.safetensors" "$results/${name}_2/model.safetensors" 2>&1 |
      head -n1 || true)
    detail+=" wrote different weights ($first)"
  else
    detail+=" wrote the same weights ($(wc -c <"$results/${name}_1/model.safetensors") bytes)"
  fi
  record "$name" "$status" "$run_seconds" "$detail"
}

# torch_step NAME SECONDS OURS ARGS...: $root/torch_reference.py ARGS (by $python,
# with $node_library_path), on the GPU,
# recorded as NAME with its result line, and its time over lockstep's step
# OURS: on what both time, the epochs (training and evaluation, the data
# already on the device; lockstep's train_s from metrics.csv), and on
# lockstep's whole process (start-up, reading the data, cuDNN's algorithm
# search, writing the model). Both sides IEEE fp32.
torch_step() {
  local name=$1 limit=$2 ours=$3 torch_s lockstep_s lockstep_wall
  shift 3
  run_logged "$name" "$limit" env LD_LIBRARY_PATH="$node_library_path" "$python" \
    "$root/torch_reference.py" "$@"
  status=$(status_of "$run_rc")
  # Its result line (a warning printed after it must not hide it).
  detail=$(grep '^{' "$results/$name.log" | tail -n1 || true)
  [[ -n $detail ]] || detail=$(tail -n1 "$results/$name.log")
  torch_s=$(sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' <<<"$detail")
  lockstep_s=$(sed -n 's/.* train_s \([0-9.]*\).*/\1/p' <<<"${metric[$ours]:-}")
  lockstep_wall=$(sed -n 's/^wall \([0-9.]*\) s.*/\1/p' <<<"${metric[$ours]:-}")
  if [[ $status == pass && -n $torch_s && -n $lockstep_s ]]; then
    metric[${name}_over_lockstep_fp32]=$(awk -v t="$torch_s" -v l="$lockstep_s" \
      'BEGIN { printf "%.2f", t / l }')
  fi
  if [[ $status == pass && -n $torch_s && -n $lockstep_wall ]]; then
    metric[${name}_over_lockstep_fp32_whole_run]=$(awk -v t="$torch_s" -v l="$lockstep_wall" \
      'BEGIN { printf "%.2f", t / l }')
  fi
  metric[$name]=$detail
  record "$name" "$status" "$run_seconds" "$detail"
}

# kernel_summary CSV TABLE: from an `ncu --csv --metrics gpu__time_duration.sum`
# log, writes TABLE (Markdown: the kernels by total time, at most 12 rows,
# with calls and share) and prints one line: "N kernels, T us: name share%,
# ..." (the first three). Kernel names lose "void ", namespaces and their
# arguments; template arguments stay (they tell fp32 from bf16). Needs
# ${python:-python3}; fails when the log holds no kernel time.
kernel_summary() {
  "${python:-python3}" - "$1" "$2" <<'PY'
import collections, csv, re, sys
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
         "s": 1e6, "second": 1e6}
header, total, calls = None, collections.Counter(), collections.Counter()
with open(sys.argv[1], newline="") as f:
    for row in csv.reader(f):
        if row[:1] == ["ID"]:
            header = {name: i for i, name in enumerate(row)}
            continue
        if header is None or len(row) != len(header):
            continue
        if row[header["Metric Name"]] != "gpu__time_duration.sum":
            continue
        name = row[header["Kernel Name"]]
        depth, cut = 0, len(name)  # the name up to its argument list
        for i, ch in enumerate(name):
            depth += ch == "<"
            depth -= ch == ">"
            if ch == "(" and depth == 0:
                cut = i
                break
        name = re.sub(r"^void ", "", name[:cut])
        name = re.sub(r"^(?:[A-Za-z_0-9]+::|\(anonymous namespace\)::|<unnamed>::)+", "", name)
        value = float(row[header["Metric Value"]].replace(",", ""))
        total[name] += value * scale[row[header["Metric Unit"]]]
        calls[name] += 1
if not total:
    sys.exit(f"{sys.argv[1]}: no kernel times (gpu__time_duration.sum)")
whole = sum(total.values())
with open(sys.argv[2], "w") as out:
    out.write(f"{sum(calls.values())} kernels, {whole:.0f} us\n\n")
    out.write("| kernel | calls | us | share |\n|---|---:|---:|---:|\n")
    for name, us in total.most_common(12):
        out.write(f"| `{name[:90]}` | {calls[name]} | {us:.1f} | {100 * us / whole:.1f}% |\n")
top = ", ".join(f"{name[:48]} {100 * us / whole:.0f}%" for name, us in total.most_common(3))
print(f"{sum(calls.values())} kernels, {whole:.0f} us: {top}")
PY
}
