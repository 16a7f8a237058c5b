// One core's arithmetic peak in GFLOP/s, measured by a loop of independent
// instructions: 512-bit vfmadd231ps (needs AVX-512F), 256-bit vfmadd231ps
// (AVX2 + FMA: the peak of the avx2 kernels) and 512-bit vdpbf16ps (needs
// AVX512_BF16). Call only on CPUs that have them (nn/cpu_isa.h).
#pragma once

namespace lockstep::bench {

double fp32_fma_peak_gflops();
double fp32_fma256_peak_gflops();
double bf16_dot_peak_gflops();

}  // namespace lockstep::bench
