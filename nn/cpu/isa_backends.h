// The CpuBackend, the 16-bit conversions and the bf16 GEMM entry points of
// each instruction set (cpu_backend.cpp, convert16.cpp, gemm_bf16.cpp,
// compiled once per set);
// cpu_backend_factory.cpp picks one.
#pragma once

#include <memory>

#include "nn/backend.h"
#include "nn/cpu/bf16_kernels.h"
#include "nn/cpu/convert16.h"

namespace lockstep::nn::cpu {

// bf16_dot: bf16 products on vdpbf16ps (avx512 only); winograd: as
// CpuBackendOptions::winograd.
namespace avx2 {
std::unique_ptr<Backend> make_isa_backend(int threads, Precision precision, bool bf16_dot,
                                          bool winograd);
extern const Convert16Kernels kConvert16Kernels;
extern const Bf16Kernels kBf16Kernels;
}  // namespace avx2
namespace avx512 {
std::unique_ptr<Backend> make_isa_backend(int threads, Precision precision, bool bf16_dot,
                                          bool winograd);
extern const Convert16Kernels kConvert16Kernels;
extern const Bf16Kernels kBf16Kernels;
}  // namespace avx512

}  // namespace lockstep::nn::cpu
