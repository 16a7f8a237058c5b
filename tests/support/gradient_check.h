// The one gradient checker every layer test uses (after Caffe's
// GradientChecker): central differences of a random linear objective
// f = sum(r * layer(x)), accumulated in double precision, on the CPU backend.
//
// For every element of the input and of every parameter, the analytic
// gradient from backward() is compared with (f(v + h) - f(v - h)) / 2h; the
// error is relative to max(|analytic|, |numeric|, 1). Elements within
// kink_range of a kink (ReLU at 0) are skipped. Failures are reported as
// gtest failures naming the tensor and index.
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace lockstep::testing {

struct GradCheckOptions {
  float step = 1e-2f;
  double tolerance = 1e-2;
  float kink = 0.0f;
  float kink_range = -1.0f;  // < 0: no kinks
  bool check_input = true;
  uint64_t seed = 1;
};

// x is the input (N, ...); the layer's parameters must already exist.
void check_layer_gradients(nn::Layer& layer, nn::Tensor& x, const nn::ForwardContext& ctx,
                           const GradCheckOptions& options = {});

// Fills t with U(lo, hi) from a fixed seed (host tensors).
void fill_random(nn::Tensor& t, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

}  // namespace lockstep::testing
