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
for name in idx cifar10 checkpoint config layers image safetensors; do
  [ -x "$bin/fuzz_$name" ] || { echo "fuzz: $bin/fuzz_$name not built" >&2 && exit 1; }
  regression=tests/fuzz/regression/$name
  if [ -d "$regression" ]; then
    "$bin/fuzz_$name" -rss_limit_mb=2048 "$regression"/* 2>&1 | tail -n 3
  fi
  case " ${FUZZ_TIMED:-idx cifar10 checkpoint config layers image safetensors} " in
    *" $name "*) ;;
    *) echo "fuzz: $name: regression corpus only" >&2 && continue ;;
  esac
  scratch=$(mktemp -d)
  dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  echo "fuzz: $name for ${seconds} s" >&2
  "$bin/fuzz_$name" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
    -timeout=20 -artifact_prefix="$out/$name-" -print_final_stats=1 "${dict[@]}" \
    "$scratch" "tests/fuzz/corpus/$name" 2>&1 | tail -n 12
  rm -rf "$scratch"
done
