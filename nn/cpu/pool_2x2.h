// Max pooling with 2x2 windows and stride 2 (the common case), one plane at
// a time, vectorised over windows. Same semantics as pool.cpp: the first
// element v of a window (row-major) with v > max or v NaN wins.
#pragma once

#include "nn/backend.h"

namespace lockstep::nn::cpu {

// x: (H, W) -> y: (P, Q)
void maxpool2x2_forward_plane(const Pool2dGeometry& g, const float* x, float* y);
// x, dx: (H, W); dy: (P, Q)
void maxpool2x2_backward_plane(const Pool2dGeometry& g, const float* x, const float* dy, float* dx);

}  // namespace lockstep::nn::cpu
