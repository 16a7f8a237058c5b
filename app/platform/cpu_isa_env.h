// LOCKSTEP_CPU_ISA=avx2|avx512: an upper bound on the instruction set of the
// CPU kernels, for tests and comparisons (unset: the widest the CPU has).
// LOCKSTEP_CPU_WINOGRAD=0|1: 0 runs every fp32 convolution directly, for
// comparisons (unset or 1: 3x3 stride-1 convolutions on Winograd F(4x4, 3x3),
// nn::CpuBackendOptions::winograd). Read here, in app/, and passed down in
// nn::CpuBackendOptions.
#pragma once

#include <optional>
#include <string>

#include "nn/backend.h"

namespace lockstep::app {

// The cap from the environment; throws InputError naming the variable when
// its value is not an instruction set.
std::optional<nn::CpuIsa> cpu_isa_cap_from_environment();

// LOCKSTEP_CPU_WINOGRAD: true unless it is 0; throws InputError naming the
// variable when its value is neither 0 nor 1.
bool cpu_winograd_from_environment();

// CPU backend options for `threads` threads under that cap and that choice.
nn::CpuBackendOptions cpu_backend_options(int threads,
                                          nn::Precision precision = nn::Precision::kFp32);

// One line for `lockstep info`: the kernels fp32 runs (the backend's
// KernelChoice), whether bf16 products run on vdpbf16ps, what the CPU has,
// the cap.
std::string cpu_isa_description();

// One line for the start-up banner when a backend's bf16 products run
// emulated (the CPU has no AVX512_BF16, or LOCKSTEP_CPU_ISA caps it away):
// the same bits as on vdpbf16ps but slower than fp32, naming why; empty
// otherwise (fp32, CUDA, bf16 on vdpbf16ps).
std::string bf16_emulation_note(const nn::KernelChoice& kernels);

}  // namespace lockstep::app
