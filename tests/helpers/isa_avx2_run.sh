#!/usr/bin/env bash
# The ctest test cpu_tests_isa_avx2 (tests/CMakeLists.txt): runs the test
# program and arguments given on the avx2 kernels (LOCKSTEP_CPU_ISA=avx2).
# On a CPU without AVX-512 F/BW/VL/DQ the default kernels already are the
# avx2 ones, so this run would repeat the unit tests: it skips (77), saying
# why.
set -euo pipefail
for flag in avx512f avx512bw avx512vl avx512dq; do
  if ! grep -qw "$flag" /proc/cpuinfo; then
    echo "SKIP: this CPU has no ${flag}: its default kernels are the avx2 ones, which the unit tests ran"
    exit 77
  fi
done
LOCKSTEP_CPU_ISA=avx2 exec "$@"
