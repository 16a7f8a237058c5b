#!/usr/bin/env bash
# The ctest test cpu_tests_isa_avx2 (tests/CMakeLists.txt): runs the test
# program and arguments given on the avx2 kernels (LOCKSTEP_CPU_ISA=avx2).
# Where the CPU's widest kernels already are the avx2 ones (as `lockstep
# info` reports nn::detect_cpu_isa), this run would repeat the unit tests:
# it skips (77), saying why.
#   isa_avx2_run.sh LOCKSTEP TEST_PROGRAM [ARGS...]
set -euo pipefail
lockstep=${1:?usage: isa_avx2_run.sh LOCKSTEP TEST_PROGRAM [ARGS...]}
shift
cpu=$(env -u LOCKSTEP_CPU_ISA "$lockstep" info | grep -E '^ *CPU *:')
if [[ $cpu != *"(CPU has avx512"* ]]; then
  echo "SKIP: this CPU's widest kernels are the avx2 ones, which the unit tests ran (lockstep info: ${cpu#*: })"
  exit 77
fi
LOCKSTEP_CPU_ISA=avx2 exec "$@"
