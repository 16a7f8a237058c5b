#!/usr/bin/env bash
# Runs every fuzz target of build-asan (scripts/sanitize.sh address,undefined
# builds them): first over tests/fuzz/regression/<name> (every input that
# ever crashed; each must pass), then for SECONDS (default 60) from
# tests/fuzz/corpus/<name>, with the dictionary tests/fuzz/<name>.dict where
# there is one. New inputs go to a scratch folder, crashes to
# build-asan/fuzz-crashes/ (add them to the regression corpus once fixed).
#   scripts/fuzz.sh [SECONDS]
# FUZZ_TIMED (default: every target) names the targets fuzzed for SECONDS;
# the others run their regression corpus only.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
bin=build-asan/tests/fuzz
out=build-asan/fuzz-crashes
mkdir -p "$out"
export ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
names=(idx cifar10 checkpoint config layers image safetensors)
# fuzz_one NAME: its regression corpus, then (when timed) SECONDS of fuzzing.
fuzz_one() {
  local name=$1 regression=tests/fuzz/regression/$1 scratch dict=() rc=0
  [ -x "$bin/fuzz_$name" ] || { echo "fuzz: $bin/fuzz_$name not built" && return 1; }
  if [ -d "$regression" ]; then
    "$bin/fuzz_$name" -rss_limit_mb=2048 "$regression"/* 2>&1 | tail -n 3
  fi
  case " ${FUZZ_TIMED:-${names[*]}} " in
    *" $name "*) ;;
    *) echo "fuzz: $name: regression corpus only" && return 0 ;;
  esac
  scratch=$(mktemp -d)
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  echo "fuzz: $name for ${seconds} s"
  "$bin/fuzz_$name" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
    -timeout=20 -artifact_prefix="$out/$name-" -print_final_stats=1 "${dict[@]}" \
    "$scratch" "tests/fuzz/corpus/$name" 2>&1 | tail -n 12 || rc=$?
  rm -rf "$scratch"
  return $rc
}
# One target per core at a time (each fuzzer is one process on one core);
# each target's log is printed whole, in order, once all have ended.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A pid_of
for name in "${names[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_one "$name" >"$logs/$name.log" 2>&1 &
  pid_of[$name]=$!
done
failed=()
for name in "${names[@]}"; do
  wait "${pid_of[$name]}" || failed+=("$name")
  cat "$logs/$name.log" >&2
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (crashes, if any, in $out/)" >&2
  exit 1
fi
