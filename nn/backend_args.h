// The arguments of the Backend's ops (backend.h) and what a backend
// reports: the geometries of convolution, pooling, BatchNorm and the
// other layer ops, BatchNorm's training state and a convolution's input
// map, the optimizers' parameters, host traffic and the kernels chosen.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::nn {

// A 2-D convolution (cross-correlation, as in PyTorch and cuDNN), square
// stride and padding, no dilation, no groups.
struct Conv2dGeometry {
  int64_t batch = 0;
  int64_t in_channels = 0, in_h = 0, in_w = 0;
  int64_t out_channels = 0, kernel_h = 0, kernel_w = 0;
  int64_t stride = 1, pad = 0;

  int64_t out_h() const { return (in_h + 2 * pad - kernel_h) / stride + 1; }
  int64_t out_w() const { return (in_w + 2 * pad - kernel_w) / stride + 1; }
  // Throws Error unless the sizes are positive (batch >= 0, pad >= 0) and the
  // kernel fits the padded input. Every backend checks it before the op.
  void validate() const;
};

// Max pooling without padding (floor mode, as PyTorch's default).
struct Pool2dGeometry {
  int64_t batch = 0, channels = 0, in_h = 0, in_w = 0;
  int64_t kernel = 2, stride = 2;

  int64_t out_h() const { return (in_h - kernel) / stride + 1; }
  int64_t out_w() const { return (in_w - kernel) / stride + 1; }
  // Throws Error unless the sizes are positive (batch >= 0) and the window
  // fits the input. Every backend checks it before the op.
  void validate() const;
};

// Batch normalisation over a tensor viewed as (N, C, S), S = H * W: one
// statistic per channel c over its N * S elements.
struct BatchNormGeometry {
  int64_t batch = 0, channels = 0, spatial = 1;
};

// A BatchNorm layer's state for the training ops, all in the backend's
// memory: weight, bias, running_mean, running_var: (C); num_batches_tracked:
// (1); stats: (2, C) doubles, (mean, invstd) of the last training forward,
// which the backward reads; coef: scratch of (5, C) floats.
struct BatchNormTrainState {
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* num_batches_tracked = nullptr;
  double* stats = nullptr;
  float* coef = nullptr;
  float eps = 1e-5f, momentum = 0.1f;
  // Backward: the forward's ReLU clamped x * scale + shift itself (no
  // residual add in between), so a backend may recompute the mask
  // batchnorm_train_backward takes from y from x instead (the same mask:
  // the CPU does, reading one tensor fewer). A backend that maps
  // convolutions' inputs (conv2d_maps_input) must: y is null where the
  // forward left its output to the convolution after it.
  bool mask_from_x = false;
};

// A per-channel map of a convolution's input (Backend::conv2d_maps_input):
// x * scale[c] + shift[c], then max(., 0) when relu; coef: (2, C) =
// (scale, shift) in the backend's memory, as batchnorm_apply takes it.
struct ConvInputMap {
  const float* coef = nullptr;
  bool relu = false;
};

// The shortcut of a CIFAR ResNet ("option A", He et al. 2016): every
// stride-th pixel of x, with pad_before zero channels in front and zeros
// after up to out_channels: y[n, pad_before + c, i, j] = x[n, c, i*s, j*s].
struct ChannelPadGeometry {
  int64_t batch = 0, in_channels = 0, in_h = 0, in_w = 0;
  int64_t out_channels = 0, pad_before = 0, stride = 1;

  int64_t out_h() const { return (in_h - 1) / stride + 1; }
  int64_t out_w() const { return (in_w - 1) / stride + 1; }
};

// Dropout over a tensor viewed as (N, C, S): one keep/drop decision per
// (n, c), shared by the S elements of that channel. Ordinary dropout is
// C = features, S = 1; channel-wise dropout (Dropout2d) is S = H * W.
//
// The decision for (n, c) is a pure function of (seed, stream, sample_ids[n],
// c): a counter-based generator, so the mask of a sample does not depend on
// which rank or batch position it lands in, nor on the device.
struct DropoutGeometry {
  int64_t batch = 0, channels = 0, spatial = 1;
  float p = 0.5f;       // probability of dropping
  uint64_t seed = 0;    // run seed
  uint64_t stream = 0;  // distinguishes layers and epochs (see Dropout layer)
};

// A batch gathered from a data set held in a backend's memory: N rows out of
// S samples of (C, H, W) uint8 pixels, each cropped and flipped as
// nn/crop_flip.h draws for (seed, epoch, sample id) when crop_padding > 0 or
// horizontal_flip (data/transform.h's augmentation).
struct GatherGeometry {
  int64_t batch = 0;    // N
  int64_t samples = 0;  // S: sample ids are in [0, S)
  int64_t channels = 0, height = 0, width = 0;
  int64_t crop_padding = 0;
  bool horizontal_flip = false;
  uint64_t seed = 0;
  int64_t epoch = 0;
};

// Sum of per-sample losses and number of correct arg-max predictions for a
// batch, returned to the host.
struct LossStats {
  double loss_sum = 0.0;
  int64_t correct = 0;
  int64_t count = 0;
};

// grad_scale (both): the gradient used is grad * grad_scale, rounded to
// float before anything else (the distributed optimizer's 1 / ranks,
// applied here because the update reads every gradient anyway).
struct SgdParams {
  float lr = 0.01f;
  float grad_scale = 1.0f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  bool first_step = false;  // PyTorch: the momentum buffer starts as the gradient
};

// lr and the betas are doubles, like PyTorch's Python floats: the bias
// corrections 1 - beta^t and the factors 1 - beta are computed in double and
// rounded to float once (with float betas, 1 - beta2 is off by 1.3e-5).
struct AdamParams {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;
  int64_t step = 1;  // 1-based step number, for bias correction
};

// What a backend made the host do since it was built (host_traffic()).
struct HostTraffic {
  int64_t waits = 0;      // the host blocked until queued device work had finished
  int64_t reads = 0;      // copies from device memory to host memory
  int64_t writes = 0;     // copies from host memory to device memory
  int64_t throttles = 0;  // a write waited for a staging buffer still in use
  HostTraffic operator-(const HostTraffic& o) const {
    return {waits - o.waits, reads - o.reads, writes - o.writes, throttles - o.throttles};
  }
  bool operator==(const HostTraffic&) const = default;
};

// The kernels a backend runs: what decides its bits beside the model, the
// data and the seed. Ranks of a reproducible run must agree on
// description(); checkpoints keep it.
struct KernelChoice {
  // One word for metrics.csv and the timeline: "cuda"; on the CPU the
  // instruction set of its kernels ("avx2", "avx512"), "avx512_bf16" when
  // bf16 products run on vdpbf16ps.
  std::string label;
  // How convolutions run, empty where the device's library chooses (CUDA):
  // "Winograd 3x3 convolutions", "direct convolutions", "bf16 direct
  // convolutions, fp32 Winograd 3x3 where it applies", "bf16 direct
  // convolutions" (bf16 without Winograd).
  std::string convolutions;
  // bf16 products computed without vdpbf16ps: the same bits, slower.
  bool bf16_emulated = false;

  // "avx2 kernels, Winograd 3x3 convolutions", "cuda kernels".
  std::string description() const {
    return label + " kernels" + (convolutions.empty() ? "" : ", " + convolutions);
  }
};

// n floats at data, in a backend's memory.
struct ConstFloats {
  const float* data = nullptr;
  int64_t n = 0;
};

}  // namespace lockstep::nn
