// Conversions between fp32 and the 16-bit formats, fp16 (IEEE binary16)
// and bf16, over arrays, vectorised once per instruction set (convert16.cpp).
// Rounding is to nearest-even; a NaN stays a NaN (bf16: the top half of its
// bits with the quiet bit set; fp16: as vcvtps2ph gives it). Each kernel
// converts a leading part of the array, a whole number of vectors, and
// returns its length: the caller converts the rest with scalar code that
// gives the same bits (distributed/compression.h).
#pragma once

#include <cstdint>

#include "nn/cpu_isa.h"

namespace lockstep::nn::cpu {

struct Convert16Kernels {
  // out[i] = in[i] rounded to fp16 (fp16) or bf16.
  int64_t (*narrow)(const float* in, uint16_t* out, int64_t n, bool fp16);
  // out[i] = the float value of in[i] (exact).
  int64_t (*widen)(const uint16_t* in, float* out, int64_t n, bool fp16);
  // inout[i] = round16(float(in[i]) + float(inout[i])).
  int64_t (*add)(const uint16_t* in, uint16_t* inout, int64_t n, bool fp16);
  // data[i] = round16(float(data[i]) / divisor).
  int64_t (*divide)(uint16_t* data, int64_t n, float divisor, bool fp16);
};

// The kernels of one instruction set (it must be one this CPU supports).
const Convert16Kernels& convert16_kernels(CpuIsa isa);
// Those of the widest instruction set this CPU supports (all give the same
// bits).
const Convert16Kernels& convert16_kernels();

}  // namespace lockstep::nn::cpu
