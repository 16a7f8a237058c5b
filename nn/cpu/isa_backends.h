// The CpuBackend of each instruction set (cpu_backend.cpp, compiled once per
// set); make_cpu_backend (cpu_backend_factory.cpp) picks one.
#pragma once

#include <memory>

#include "nn/backend.h"

namespace lockstep::nn::cpu {

namespace avx2 {
std::unique_ptr<Backend> make_isa_backend(int threads);
}
namespace avx512 {
std::unique_ptr<Backend> make_isa_backend(int threads);
}

}  // namespace lockstep::nn::cpu
