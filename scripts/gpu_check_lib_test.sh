#!/usr/bin/env bash
# The rules of gpu_check_lib.sh that decide the GPU check's verdict, without
# a GPU (ctest gpu_check_lib):
#   - a step is not started when less than half its limit is left of the
#     budget ("no time"), runs under a limit cut to the deadline otherwise,
#     and a command over its limit is a timeout;
#   - the verdict is fail when any step failed, incomplete when a step could
#     not run here ("no time", "no torch", unsupported), else pass, and the
#     summaries say so;
#   - a run's accuracy: its last epoch's and the mean of its last five.
#   - failed tests counted once each and named, from a gtest report;
#   - repeat_step: two runs' weights compared (same, drifting, a failed run);
#   - torch_step: PyTorch's result line and its time over lockstep's;
#   - kernel_summary: ncu's kernel times by kernel (scripts/testdata).
set -euo pipefail
# Globals gpu_check_lib.sh reads and sets:
# shellcheck disable=SC2034,SC2154
here=$(cd "$(dirname "$0")" && pwd)
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
mode=gpu bundle_version=test
# shellcheck source=scripts/gpu_check_lib.sh
source "$here/gpu_check_lib.sh"

fail() {
  echo "gpu_check_lib_test: $*" >&2
  exit 1
}
expect() {  # expect WHAT WANT GOT
  [[ $2 == "$3" ]] || fail "$1: expected '$2', got '$3'"
}

# Plenty of time: the command runs and its output is logged.
deadline=$(($(date +%s) + 100))
run_logged quick 10 echo hello
expect "quick rc" 0 "$run_rc"
expect "quick log" hello "$(cat "$results/quick.log")"
expect "quick status" pass "$(status_of "$run_rc")"
# A failing command keeps its status.
run_logged failing 10 false
expect "failing status" fail "$(status_of "$run_rc")"
# Over its limit: a timeout.
run_logged slow 1 sleep 30
expect "slow status" timeout "$(status_of "$run_rc")"
# Less than half of its limit left: not started, and the log says why.
deadline=$(($(date +%s) + 20))
run_logged late 60 touch "$results/late_ran"
expect "late status" "no time" "$(status_of "$run_rc")"
[[ ! -e $results/late_ran ]] || fail "a step without time was started"
grep -q "needs up to 60 s: not started" "$results/late.log" || fail "late.log: $(cat "$results/late.log")"
# More than half left: started, under the time that is left.
run_logged cut 30 touch "$results/cut_ran"
expect "cut status" pass "$(status_of "$run_rc")"
[[ -e $results/cut_ran ]] || fail "a step with more than half its limit left did not run"
# Stopped by the end of the budget after its limit was cut to it: no time
# (the check is incomplete), not a timeout (a failure).
deadline=$(($(date +%s) + 2))
run_logged budget 3 sleep 30
expect "budget status" "no time" "$(status_of "$run_rc")"
grep -q "stopped at the end of the budget" "$results/budget.log" || fail "budget.log: $(cat "$results/budget.log")"

# The verdict.
verdict() {  # verdict STATUS...: overall_status of steps with these statuses
  step_names=() step_status=()
  local s
  for s in "$@"; do step_names+=(step) step_status+=("$s"); done
  overall_status
}
expect "all pass" pass "$(verdict pass pass)"
expect "dry run" pass "$(verdict pass "no GPU" "no GPU")"
expect "cut short" incomplete "$(verdict pass "no time")"
expect "no torch" incomplete "$(verdict pass "no torch" pass)"
expect "sanitizer refused" incomplete "$(verdict unsupported pass)"
expect "failure wins" fail "$(verdict "no time" fail pass)"
expect "timeout" fail "$(verdict pass timeout)"
expect "refused driver" fail "$(verdict refused)"
expect "no profiler" pass "$(verdict pass "no profile")"

# metrics.csv: the last epoch's test accuracy and the mean of the last five
# (of fewer when fewer ran); column 7 is test_accuracy.
csv=$results/metrics.csv
echo "epoch,lr,train_loss,train_accuracy,train_samples,test_loss,test_accuracy,test_samples,seconds,images_per_second" >"$csv"
for e in 1 2 3; do echo "$e,0.01,1,0.5,100,1,0.$((80 + e)),100,2,50" >>"$csv"; done
metrics_summary "$csv"
expect "accuracy of 3 epochs" 83.00 "$csv_accuracy"
expect "mean of 3 epochs" 82.00 "$csv_accuracy_last5"
for e in 4 5 6 7; do echo "$e,0.01,1,0.5,100,1,0.$((80 + e)),100,2,50" >>"$csv"; done
metrics_summary "$csv"
expect "accuracy of 7 epochs" 87.00 "$csv_accuracy"
expect "mean of the last 5" 85.00 "$csv_accuracy_last5"
expect "summary line" "acc 87.00% last5 85.00% img/s 50 epochs 7 train_s 14.0" "$csv_summary"

# The summaries carry the verdict and each step.
step_names=() step_status=() step_seconds=() step_detail=()
record gpu_tests pass 12.5 "10 tests" 2>/dev/null
record memcheck "no time" 0 "not started" 2>/dev/null
grep -q '^# lockstep GPU check: incomplete$' "$results/summary.md" || fail "summary.md verdict"
grep -q '| memcheck | no time | 0 | not started |' "$results/summary.md" || fail "summary.md row"
grep -q '"status": "incomplete"' "$results/summary.json" || fail "summary.json verdict"
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["steps"][1]["status"] == "no time"' \
    "$results/summary.json" || fail "summary.json is not the JSON expected"
fi
# The results packed for a machine that returns only a few files: the two
# summaries and one archive of the logs, without checkpoints.
mkdir -p "$results/run/checkpoints"
echo ckpt >"$results/run/checkpoints/x.lsck"
echo log >"$results/run.log"
pack_results "$results/out"
for f in summary.md summary.json results.tar.xz; do
  [[ -f $results/out/$f ]] || fail "pack_results left no $f"
done
listing=$(tar -tJf "$results/out/results.tar.xz")
grep -q 'run.log$' <<<"$listing" || fail "results.tar.xz lacks run.log: $listing"
! grep -q '\.lsck$' <<<"$listing" || fail "results.tar.xz holds a checkpoint: $listing"
# The folder packed into, inside the results here, is not packed itself
# (tar reading the archive it writes failed now and then).
! grep -q '/out/' <<<"$listing" || fail "results.tar.xz holds the folder it was packed into: $listing"

# A bare GPU machine may lack the xz program (tar -J calls it): the logs
# are packed as results.tar.gz, and the bundle's .tar.xz archives unpacked
# by the machine's Python (tarfile reads xz itself), executable bits kept;
# with neither, unpacking fails (gpu_check.sh records it).
# (The interpreter itself: a pyenv shim would need bash on the PATH.)
python=$(python3 -c 'import sys; print(sys.executable)') ||
  fail "python3 is needed (on a GPU machine, PyTorch's)"
no_xz=$results/no_xz_bin
mkdir -p "$no_xz"
for tool in tar gzip mkdir cp mv rm dirname basename; do
  ln -s "$(command -v "$tool")" "$no_xz/$tool"
done
(PATH=$no_xz && pack_results "$results/out_gz")
[[ -f $results/out_gz/results.tar.gz && ! -e $results/out_gz/results.tar.xz ]] ||
  fail "without xz, pack_results left: $(ls "$results/out_gz")"
listing=$(tar -tzf "$results/out_gz/results.tar.gz")  # whole: grep -q would cut tar's pipe
grep -q 'run.log$' <<<"$listing" || fail "results.tar.gz lacks run.log: $listing"
mkdir -p "$results/bundle/bin" "$results/unpacked"
printf '#!/bin/sh\necho from the bundle\n' >"$results/bundle/bin/tool"
chmod +x "$results/bundle/bin/tool"
tar -C "$results/bundle" -cJf "$results/programs.tar.xz" bin
(PATH=$no_xz && unpack_archive "$results/programs.tar.xz" "$results/unpacked" "$python") ||
  fail "Python did not unpack programs.tar.xz"
expect "a program unpacked by Python" "from the bundle" "$("$results/unpacked/bin/tool")"
if (PATH=$no_xz && unpack_archive "$results/programs.tar.xz" "$results/unpacked" "") 2>/dev/null; then
  fail "unpack_archive succeeded without xz or Python"
fi
# A gtest report: a test with two failed assertions counts once, and the
# failed tests are named (the first GPU run said "11 failed" for two tests).
cat >"$results/report.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="2" disabled="0" errors="0" time="0.1" name="AllTests">
  <testsuite name="CudaBackendTest" tests="4" failures="2" disabled="0" skipped="1" errors="0" time="0.1">
    <testcase name="Passes" file="a.cpp" line="1" status="run" result="completed" time="0" classname="CudaBackendTest" />
    <testcase name="TwoAsserts" file="a.cpp" line="2" status="run" result="completed" time="0" classname="CudaBackendTest">
      <failure message="a.cpp:3&#x0A;first" type=""><![CDATA[a.cpp:3
first]]></failure>
      <failure message="a.cpp:4&#x0A;second" type=""><![CDATA[a.cpp:4
second]]></failure>
    </testcase>
    <testcase name="Skips" file="a.cpp" line="5" status="run" result="skipped" time="0" classname="CudaBackendTest">
      <skipped message="a.cpp:6&#x0A;no device: &quot;none&quot;"><![CDATA[a.cpp:6
no device]]></skipped>
    </testcase>
    <testcase name="OneAssert" file="a.cpp" line="7" status="run" result="completed" time="0" classname="CudaBackendTest">
      <failure message="a.cpp:8&#x0A;third" type=""><![CDATA[a.cpp:8
third]]></failure>
    </testcase>
  </testsuite>
</testsuites>
XML
xml_counts "$results/report.xml"
expect "tests in the report" 4 "$xml_tests"
expect "failed tests in the report" 2 "$xml_failures"
expect "failed names" "CudaBackendTest.TwoAsserts, CudaBackendTest.OneAssert" "$xml_failed_names"
expect "skipped tests" 1 "$xml_skipped"
expect "skip text" 'no device: "none"' "$xml_skip_text"
xml_counts "$results/absent.xml"
expect "no report: no failures" "0 0 ''" "$xml_tests $xml_failures '$xml_failed_names'"
# repeat_step: two runs that write the same weights pass; a drift between
# them, or a run that fails, is a failure named in the detail. A fake
# trainer writes --run-dir/model.safetensors: "weights", plus its call count
# when $FAKE_DRIFT is set; $FAKE_FAIL makes it fail.
deadline=$(($(date +%s) + 100))
root=$results/root lockstep=$results/fake_lockstep
mkdir -p "$root/configs"
cat >"$lockstep" <<'SH'
#!/usr/bin/env bash
[[ -z ${FAKE_FAIL:-} ]] || { echo "fake: a CUDA error" >&2; exit 3; }
while (($#)); do [[ $1 == --run-dir ]] && dir=$2; shift; done
mkdir -p "$dir"
count=$(($(cat "$dir/../calls" 2>/dev/null || echo 0) + 1))
echo "$count" >"$dir/../calls"
printf 'weights%s' "${FAKE_DRIFT:+ $count}" >"$dir/model.safetensors"
SH
chmod +x "$lockstep"
step_names=() step_status=() step_seconds=() step_detail=()
repeat_step same config.toml --epochs 1
expect "same weights" pass "${step_status[-1]}"
[[ ${step_detail[-1]} == *"wrote the same weights (7 bytes)"* ]] || fail "same detail: ${step_detail[-1]}"
FAKE_DRIFT=1 repeat_step drift config.toml
expect "drifting weights" fail "${step_status[-1]}"
[[ ${step_detail[-1]} == *"wrote different weights"*"differ: byte 9"* ]] || fail "drift detail: ${step_detail[-1]}"
FAKE_FAIL=1 repeat_step broken config.toml
expect "a failed run" fail "${step_status[-1]}"
[[ ${step_detail[-1]} == *"run 1 ended: fake: a CUDA error"* ]] || fail "broken detail: ${step_detail[-1]}"
# torch_step: PyTorch's result line recorded (not a warning printed after
# it), and its time over lockstep's epochs and over its whole process.
python=$results/fake_python node_library_path=""
cat >"$python" <<'SH'
#!/usr/bin/env bash
echo "epoch 1 test accuracy 50.00%"
echo '{"epochs": 3, "seconds": 16.5, "images_per_second": 11000.0, "model": "resnet20"}'
echo "UserWarning: something after the result"
SH
chmod +x "$python"
touch "$root/torch_reference.py"
metric[resnet20_fp32]="wall 11.0 s, acc 91.56% last5 89.11% img/s 18041 epochs 3 train_s 10.0"
torch_step resnet20_torch 30 resnet20_fp32 --model resnet20
expect "torch step" pass "${step_status[-1]}"
expect "torch result line" '{"epochs": 3, "seconds": 16.5, "images_per_second": 11000.0, "model": "resnet20"}' \
  "${step_detail[-1]}"
expect "torch over lockstep's epochs" 1.65 "${metric[resnet20_torch_over_lockstep_fp32]}"
expect "torch over lockstep's process" 1.50 "${metric[resnet20_torch_over_lockstep_fp32_whole_run]}"
# kernel_summary: ncu's kernel times (a sample of a real log, resnet20 fp32
# on an H200) summed by kernel, names without "void", namespaces or
# arguments, most time first.
python=python3
line=$(kernel_summary "$here/testdata/ncu_resnet20_fp32.csv" "$results/kernels.md")
expect "kernel line" "63 kernels, 2213 us: grad_sums_kernel 27%, wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, 0,  18%, implicit_convolve_sgemm<float, float, 1024, 5, 5 16%" "$line"
# shellcheck disable=SC2016 # (backquotes: Markdown, not a command)
grep -qxF '| `wgrad2d_grouped_direct_kernel<0, 1, int, float, float, float>` | 1 | 349.9 | 15.8% |' \
  "$results/kernels.md" || fail "kernels.md: $(cat "$results/kernels.md")"
expect "kernel rows" 12 "$(grep -c '^| `' "$results/kernels.md")"
printf '==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM\n' >"$results/refused.csv"
if kernel_summary "$results/refused.csv" "$results/refused.md" 2>"$results/refused.err"; then
  fail "kernel_summary passed a log without kernel times"
fi
grep -q 'no kernel times' "$results/refused.err" || fail "refused.err: $(cat "$results/refused.err")"
echo "gpu_check_lib_test: passed"
