// im2col / col2im for one sample of a 2-D convolution (zero padding). Both
// use the calling thread's ScratchSlot::kPadded buffer when pad > 0.
//
// The column matrix has C*R*S rows, one per (channel, kernel row, kernel
// column), and P*Q columns, one per output position:
//   col[(c*R + r)*S + s, p*Q + q] = x[c, p*stride + r - pad, q*stride + s - pad]
// (0 outside the image). Rows are `ld` floats apart so that several samples
// can sit side by side in one wider matrix (ld >= P*Q).
#pragma once

#include <cstdint>

#include "nn/backend.h"

namespace lockstep::nn::cpu {

// x: (C, H, W) -> col: (C*R*S, P*Q) with row stride ld
void im2col(const Conv2dGeometry& g, const float* x, float* col, int64_t ld);

// col: (C*R*S, P*Q) with row stride ld -> dx: (C, H, W), overwritten with the
// sum of every column entry that reads each pixel (the adjoint of im2col).
void col2im(const Conv2dGeometry& g, const float* col, int64_t ld, float* dx);

}  // namespace lockstep::nn::cpu
