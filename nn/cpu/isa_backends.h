// The CpuBackend of each instruction set (cpu_backend.cpp, compiled once per
// set); make_cpu_backend (cpu_backend_factory.cpp) picks one.
#pragma once

#include <memory>

#include "nn/backend.h"

namespace lockstep::nn::cpu {

// bf16_dot: bf16 products on vdpbf16ps (avx512 only).
namespace avx2 {
std::unique_ptr<Backend> make_isa_backend(int threads, Precision precision, bool bf16_dot);
}
namespace avx512 {
std::unique_ptr<Backend> make_isa_backend(int threads, Precision precision, bool bf16_dot);
}

}  // namespace lockstep::nn::cpu
