// The CPU baseline check (cpu_baseline.h) as the first initialiser of the
// lockstep binary: a CPU without a feature the build was compiled for gets
// one line on stderr and exit status 1, before any code compiled for that
// baseline runs. Compiled for plain x86-64, like cpu_baseline.cpp.
// LOCKSTEP_TEST_HIDE_CPU_FEATURES=avx2,fma (comma-separated) makes the check
// see a CPU without those features, for tests.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "app/platform/cpu_baseline.h"

namespace {

// Priority 101: before every initialiser of default priority (all C++
// static constructors) of this binary.
__attribute__((constructor(101))) void check_cpu_baseline() {
  using namespace lockstep::app;
  const char* present[64];
  size_t count = detect_cpu_features(present, sizeof present / sizeof present[0]);
  if (const char* hidden = std::getenv("LOCKSTEP_TEST_HIDE_CPU_FEATURES")) {
    count = hide_cpu_features(present, count, hidden);
  }
  char line[1024];
  if (!cpu_baseline_problem(kCpuBuildFeatures, kCpuBuildTarget, present, count, line,
                            sizeof line - 1)) {
    return;
  }
  std::strcat(line, "\n");
  if (write(STDERR_FILENO, line, std::strlen(line)) < 0) _exit(1);
  _exit(1);
}

}  // namespace
