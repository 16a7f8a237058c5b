// Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_): with
// total = sqrt(sum over every parameter of |grad_scale * grad|^2), the
// gradients are scaled by min(1, max_norm / (total + 1e-6)).
#pragma once

#include <vector>

#include "nn/layer.h"

namespace lockstep::nn {

// The global L2 norm of grad_scale * grad over params, accumulated in double
// (device gradients are copied to the host first).
double global_grad_norm(const std::vector<Parameter*>& params, float grad_scale);

// min(1, max_norm / (total_norm + 1e-6)): the factor PyTorch multiplies the
// gradients by; 1 when max_norm <= 0 (clipping off).
float clip_coefficient(double total_norm, double max_norm);

}  // namespace lockstep::nn
