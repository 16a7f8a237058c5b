// The CPU backend the tests use: its instruction set capped by
// LOCKSTEP_CPU_ISA exactly as the lockstep command caps it, so that CTest can
// run the CPU tests once per instruction set (tests/CMakeLists.txt).
#pragma once

#include <memory>

#include "app/platform/cpu_isa_env.h"
#include "nn/backend.h"

namespace lockstep::testing {

inline std::unique_ptr<nn::Backend> test_cpu_backend(int threads) {
  return nn::make_cpu_backend(app::cpu_backend_options(threads));
}

}  // namespace lockstep::testing
