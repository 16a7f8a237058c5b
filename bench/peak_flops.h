// One core's arithmetic peak in GFLOP/s, measured by a loop of independent
// 512-bit instructions: vfmadd231ps (needs AVX-512F) and vdpbf16ps (needs
// AVX512_BF16). Call only on CPUs that have them (nn/cpu_isa.h).
#pragma once

namespace lockstep::bench {

double fp32_fma_peak_gflops();
double bf16_dot_peak_gflops();

}  // namespace lockstep::bench
