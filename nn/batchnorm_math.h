// BatchNorm's per-channel arithmetic between the sums and the element-wise
// passes (nn/layers/batch_norm2d.h gives the formulas), in one place for the
// three that run it: BatchNorm2d on host values (SyncBatchNorm, the
// reproducible mode), the CPU backend's and CUDA's training ops
// (Backend::batchnorm_train_forward / _backward) on device values. All in
// double, rounded to float where a float is stored, so every path gives the
// same bits. Each a - b c is written as the fused multiply-add it is
// compiled to, so that neither compiler (GCC contracts, nvcc fuses with
// --fmad) chooses which products fuse.
#pragma once

#include <cmath>
#include <cstdint>

#include "nn/host_device.h"

namespace lockstep::nn {

// What the forward leaves for the backward of one channel.
struct BatchNormChannel {
  double mean = 0.0, invstd = 0.0;
};

// y's coefficients of one channel: scale = weight invstd, shift = bias -
// mean scale.
LOCKSTEP_HOST_DEVICE inline void batchnorm_channel_coef(const BatchNormChannel& ch, float weight,
                                                        float bias, float& scale, float& shift) {
  const double s = weight * ch.invstd;
  scale = static_cast<float>(s);
  shift = static_cast<float>(fma(-ch.mean, s, static_cast<double>(bias)));
}

// Evaluation: the channel of the running statistics (mean = running_mean,
// invstd = 1 / sqrt(running_var + eps)) and y's coefficients
// (batchnorm_channel_coef).
LOCKSTEP_HOST_DEVICE inline BatchNormChannel batchnorm_channel_eval(float running_mean,
                                                                    float running_var, float eps,
                                                                    float weight, float bias,
                                                                    float& scale, float& shift) {
  const BatchNormChannel ch{running_mean, 1.0 / sqrt(static_cast<double>(running_var) + eps)};
  batchnorm_channel_coef(ch, weight, bias, scale, shift);
  return ch;
}

// From sum x and sum x^2 over count elements: mean, invstd = 1 / sqrt(var +
// eps) (var biased, clamped at 0), the running statistics moved by momentum
// (running_var towards the unbiased variance), and y's coefficients
// (batchnorm_channel_coef).
LOCKSTEP_HOST_DEVICE inline BatchNormChannel batchnorm_channel_forward(
    double sum, double sumsq, double count, float eps, float momentum, float weight, float bias,
    float& running_mean, float& running_var, float& scale, float& shift) {
  BatchNormChannel ch;
  ch.mean = sum / count;
  const double v = fma(-ch.mean, ch.mean, sumsq / count);
  const double var = v > 0.0 ? v : 0.0;  // NaN too, as std::max(0.0, v)
  ch.invstd = 1.0 / sqrt(var + eps);
  const double unbiased = count > 1 ? var * count / (count - 1) : var;
  const double m = momentum;
  running_mean = static_cast<float>(fma(m, ch.mean, (1 - m) * running_mean));
  running_var = static_cast<float>(fma(m, unbiased, (1 - m) * running_var));
  batchnorm_channel_coef(ch, weight, bias, scale, shift);
  return ch;
}

// The coefficients of batchnorm_backward_apply for one channel from the sums
// of g' and g' xhat: k = weight invstd, a = sum_dy / count, b = sum_dy_xhat /
// count (inv_count 0: evaluation-mode statistics, only the scale remains).
LOCKSTEP_HOST_DEVICE inline void batchnorm_channel_backward(const BatchNormChannel& ch,
                                                            float weight, double sum_dy,
                                                            double sum_dy_xhat, double inv_count,
                                                            float& k, float& a, float& b) {
  k = static_cast<float>(weight * ch.invstd);
  a = static_cast<float>(sum_dy * inv_count);
  b = static_cast<float>(sum_dy_xhat * inv_count);
}

}  // namespace lockstep::nn
