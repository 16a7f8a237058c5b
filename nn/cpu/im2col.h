// im2col / col2im for a group of samples of a 2-D convolution (zero
// padding). Both use the calling thread's ScratchSlot::kPadded buffer when
// pad > 0.
//
// The column matrix has C*R*S rows, one per (channel, kernel row, kernel
// column), and P*Q columns, one per output position:
//   col[(c*R + r)*S + s, p*Q + q] = x[c, p*stride + r - pad, q*stride + s - pad]
// (0 outside the image). Rows are `ld` floats apart so that several samples
// can sit side by side in one wider matrix (ld >= P*Q).
#pragma once

#include "nn/cpu/isa_namespace.h"

#include <cstdint>

#include "nn/backend.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

// x: (count, C, H, W) -> col: (C*R*S, count*P*Q) with row stride ld, sample
// i's P*Q columns at column i*P*Q (ld >= count*P*Q).
void im2col(const Conv2dGeometry& g, const float* x, int64_t count, float* col, int64_t ld);

// col: as above -> dx: (count, C, H, W), overwritten with the sum of every
// column entry that reads each pixel (the adjoint of im2col).
void col2im(const Conv2dGeometry& g, const float* col, int64_t ld, int64_t count, float* dx);

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
