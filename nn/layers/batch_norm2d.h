// BatchNorm2d, with PyTorch's semantics (nn.BatchNorm2d, affine, eps 1e-5,
// momentum 0.1), optionally followed by a fused ReLU.
//   x, y: (N, C, H, W); per channel c over its M = N * H * W elements:
//   training:  mean, var = batch mean and biased variance of x;
//              running_mean = 0.9 running_mean + 0.1 mean,
//              running_var  = 0.9 running_var + 0.1 var * M / (M - 1),
//              num_batches_tracked += 1
//   eval:      mean, var = running_mean, running_var
//   y = relu?((x - mean) / sqrt(var + eps) * weight + bias)
// Gradients (training, g = dy masked by y > 0 when the ReLU is fused,
// xhat = (x - mean) / sqrt(var + eps)):
//   dweight = sum g * xhat, dbias = sum g,
//   dx = weight / sqrt(var + eps) * (g - mean(g) - xhat * mean(g * xhat)).
// With ForwardContext::batch_stats (SyncBatchNorm) the sums behind mean,
// var, mean(g) and mean(g * xhat) run over the global batch: one reduction
// of (sum, sum of squares, count) in forward, one of (sum g, sum g * xhat)
// in backward; dweight and dbias stay this rank's sums (the distributed
// optimizer averages them like every gradient).
// Initialisation: weight = 1, bias = 0, running_mean = 0, running_var = 1.
#pragma once

#include "nn/batchnorm_math.h"
#include "nn/layer.h"

namespace lockstep::nn {

class Conv2d;

class BatchNorm2d final : public Layer {
 public:
  explicit BatchNorm2d(int64_t channels, bool relu = false, float eps = 1e-5f,
                       float momentum = 0.1f);

  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  std::vector<Buffer*> buffers() override {
    return {&running_mean_, &running_var_, &num_batches_tracked_};
  }
  void reset_parameters(uint64_t seed, Device device) override;

  float eps() const { return eps_; }
  bool fused_relu() const { return relu_; }

  // For the next forward only: y = relu?(BN(x) + residual), the ReLU when
  // relu or fused_relu() (the end of a residual block, added in the apply
  // pass; residual: x's shape, alive during that forward). The backward of
  // that forward masks dy by y > 0 when there was a ReLU.
  void set_next_residual(const Tensor& residual, bool relu) {
    residual_ = &residual;
    residual_relu_ = relu;
  }

  // next: the convolution that alone reads this layer's output (the next
  // layer of a Sequential or a model; pair_batchnorm_conv). A training
  // forward on the device path (ordinary per-rank statistics) then leaves
  // its apply pass to next where the backend maps next's input
  // (Backend::conv2d_maps_input): y is neither written nor allocated
  // (writes_output false: Layer::prepare_output leaves it unallocated),
  // and next reads x through (scale, shift) and the ReLU. The same bits,
  // one pass over the activations fewer; the backward takes the ReLU's
  // mask from x.
  void map_into(Conv2d& next) { next_conv_ = &next; }
  bool writes_output(const Backend& backend, const Shape& input,
                     const ForwardContext& ctx) const override;

 private:
  void backward_apply(Backend& backend, const BatchNormGeometry& g, const Tensor& x,
                      const float* masked, const Tensor& dy, const std::vector<double>& sums,
                      Tensor& dx);
  BatchNormGeometry geometry(const Shape& input) const;
  bool on_device(const ForwardContext& ctx) const;
  // The host path (SyncBatchNorm, the reproducible mode's exact sums):
  // batch mean and invstd from the sums read back, the running statistics
  // updated, y's coefficients into coef_host_.
  void batch_statistics(Backend& backend, const BatchNormGeometry& g, const Tensor& x,
                        BatchStatsReducer* reducer);
  // Evaluation's statistics read back to the host, for a backward in
  // evaluation mode (the forward computes them on the device).
  void running_statistics();
  // The device path (per-rank training statistics of ordinary sums, and
  // evaluation's coefficients).
  BatchNormTrainState train_state();

  int64_t channels_;
  bool relu_;
  float eps_, momentum_;
  bool masked_;                    // the last forward applied a ReLU: backward masks dy by y > 0
  bool residual_forward_ = false;  // the last forward added a residual (before its ReLU)
  Parameter weight_, bias_;
  Buffer running_mean_, running_var_, num_batches_tracked_;
  std::vector<BatchNormChannel> channels_host_;  // host path: of the last forward
  double count_ = 0;                  // host path: elements per channel (global with a reducer)
  bool training_ = false;             // mode of the last forward
  bool on_device_ = false;            // the last training forward took the device path (stats_)
  const Tensor* residual_ = nullptr;  // set_next_residual, for the next forward
  bool residual_relu_ = false;
  BatchStatsReducer* reducer_ = nullptr;  // of the last training forward
  Tensor coef_, coef_host_;               // device and host per-channel coefficients
  Tensor stats_;                          // device path: (2, C) doubles, mean and invstd
  Conv2d* next_conv_ = nullptr;           // map_into
};

// previous.map_into(next) when previous is a BatchNorm2d and next a Conv2d
// that reads its output alone (consecutive layers of a Sequential or a
// model); nothing otherwise.
void pair_batchnorm_conv(Layer& previous, Layer& next);

}  // namespace lockstep::nn
