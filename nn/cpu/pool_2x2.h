// Max pooling with 2x2 windows and stride 2 (the common case) over a range
// of (n, c) planes, vectorised over windows. Same semantics as pool.cpp: the
// first element v of a window (row-major) with v > max or v NaN wins.
#pragma once

#include "nn/cpu/isa_namespace.h"

#include <cstdint>

#include "nn/backend.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

// Planes [first, last) of x: (N*C, H, W) -> y: (N*C, P, Q)
void maxpool2x2_forward(const Pool2dGeometry& g, const float* x, float* y, int64_t first,
                        int64_t last);
// Planes [first, last) of x, dx: (N*C, H, W); dy: (N*C, P, Q)
void maxpool2x2_backward(const Pool2dGeometry& g, const float* x, const float* dy, float* dx,
                         int64_t first, int64_t last);

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
