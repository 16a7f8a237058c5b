#include "nn/layers/batch_norm2d.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.h"
#include "nn/batch_stats_reducer.h"
#include "nn/batchnorm_math.h"
#include "nn/layer_registry.h"
#include "nn/layers/batch_norm_exact.h"
#include "nn/layers/conv2d.h"

namespace lockstep::nn {

BatchNorm2d::BatchNorm2d(int64_t channels, bool relu, float eps, float momentum)
    : channels_(channels), relu_(relu), eps_(eps), momentum_(momentum), masked_(relu) {
  if (channels <= 0 || eps <= 0.0f || momentum < 0.0f || momentum > 1.0f) {
    fail_input("batchnorm2d: invalid arguments channels=", channels, " eps=", eps,
               " momentum=", momentum);
  }
}

std::string BatchNorm2d::describe() const {
  return detail::concat("batchnorm2d(", channels_, relu_ ? ")+relu" : ")");
}

BatchNormGeometry BatchNorm2d::geometry(const Shape& input) const {
  if (input.size() != 4 || input[1] != channels_) {
    fail_input(name(), " ", describe(), ": expects input (N, ", channels_, ", H, W), got ",
               shape_string(input));
  }
  return {input[0], channels_, input[2] * input[3]};
}

Shape BatchNorm2d::output_shape(const Shape& input) const {
  geometry(input);
  return input;
}

BatchNormTrainState BatchNorm2d::train_state() {
  return {.weight = weight_.value.data(),
          .bias = bias_.value.data(),
          .running_mean = running_mean_.value.data(),
          .running_var = running_var_.value.data(),
          .num_batches_tracked = num_batches_tracked_.value.data(),
          .stats = reinterpret_cast<double*>(stats_.data()),
          .coef = coef_.data(),
          .eps = eps_,
          .momentum = momentum_,
          .mask_from_x = masked_ && !residual_forward_};
}

void BatchNorm2d::batch_statistics(Backend& backend, const BatchNormGeometry& g, const Tensor& x,
                                   BatchStatsReducer* reducer) {
  const auto C = static_cast<size_t>(channels_);
  std::vector<double> sums(2 * C + 1);
  if (weight_.exact != nullptr) {  // reproducible mode: exact sums of per-sample sums
    sums = exact_batch_stats(backend, g, x.data(), reducer, name() + " forward statistics");
  } else {
    backend.batchnorm_stats(g, x.data(), sums.data(), sums.data() + C);
    sums[2 * C] = static_cast<double>(g.batch * g.spatial);
    if (reducer != nullptr) reducer->sum(sums, name() + " forward statistics");
  }
  count_ = sums[2 * C];
  if (count_ <= 0) fail_input(name(), ": batch statistics of an empty batch");
  channels_host_.resize(C);
  Tensor rm({channels_}), rv({channels_}), nbt({1}), w({channels_}), b({channels_});
  rm.copy_from(running_mean_.value);
  rv.copy_from(running_var_.value);
  nbt.copy_from(num_batches_tracked_.value);
  w.copy_from(weight_.value);
  b.copy_from(bias_.value);
  coef_host_.resize({2, channels_});
  float* k = coef_host_.data();
  for (size_t c = 0; c < C; ++c) {
    channels_host_[c] =
        batchnorm_channel_forward(sums[c], sums[C + c], count_, eps_, momentum_, w.data()[c],
                                  b.data()[c], rm.data()[c], rv.data()[c], k[c], k[C + c]);
  }
  nbt.data()[0] += 1.0f;
  running_mean_.value.copy_from(rm);
  running_var_.value.copy_from(rv);
  num_batches_tracked_.value.copy_from(nbt);
}

void BatchNorm2d::running_statistics() {
  const auto C = static_cast<size_t>(channels_);
  Tensor rm({channels_}), rv({channels_}), w({channels_}), b({channels_});
  rm.copy_from(running_mean_.value);
  rv.copy_from(running_var_.value);
  w.copy_from(weight_.value);
  b.copy_from(bias_.value);
  channels_host_.resize(C);
  coef_host_.resize({2, channels_});
  float* k = coef_host_.data();
  for (size_t c = 0; c < C; ++c) {
    channels_host_[c] = batchnorm_channel_eval(rm.data()[c], rv.data()[c], eps_, w.data()[c],
                                               b.data()[c], k[c], k[C + c]);
  }
}

// Per-rank statistics of ordinary sums: all on the device, nothing read back.
bool BatchNorm2d::on_device(const ForwardContext& ctx) const {
  return ctx.training && ctx.batch_stats == nullptr && weight_.exact == nullptr;
}

bool BatchNorm2d::writes_output(const Backend& backend, const Shape& input,
                                const ForwardContext& ctx) const {
  return !on_device(ctx) || residual_ != nullptr || next_conv_ == nullptr ||
         !next_conv_->maps_input(backend, input);
}

void BatchNorm2d::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  const BatchNormGeometry g = geometry(x.shape());
  const bool writes = writes_output(backend, x.shape(), ctx);
  LOCKSTEP_CHECK(!writes || y.allocated(), name(), ": an unallocated output to write");
  const Tensor* residual = std::exchange(residual_, nullptr);
  const float* add = residual != nullptr ? residual->data() : nullptr;
  if (residual != nullptr && residual->shape() != x.shape()) {
    fail_input(name(), ": a residual of ", shape_string(residual->shape()), " for input ",
               shape_string(x.shape()));
  }
  if (next_conv_ != nullptr) next_conv_->set_next_input(nullptr, {});  // unless mapped below
  masked_ = relu_ || (residual != nullptr && residual_relu_);
  residual_forward_ = residual != nullptr;
  training_ = ctx.training;
  reducer_ = ctx.training ? ctx.batch_stats : nullptr;
  on_device_ = on_device(ctx);
  if (on_device_) {
    if (g.batch * g.spatial <= 0) fail_input(name(), ": batch statistics of an empty batch");
    if (add != nullptr) {
      backend.batchnorm_train_forward_add(g, train_state(), x.data(), add, masked_, y.data());
    } else if (!writes) {  // the apply pass left to the next convolution
      backend.batchnorm_train_forward(g, train_state(), x.data(), masked_, nullptr);
      next_conv_->set_next_input(&x, {.coef = coef_.data(), .relu = masked_});
    } else {
      backend.batchnorm_train_forward(g, train_state(), x.data(), masked_, y.data());
    }
    return;
  }
  if (!ctx.training) {  // the running statistics' coefficients, on the device
    backend.batchnorm_eval_coef(channels_, train_state());
  } else {
    batch_statistics(backend, g, x, reducer_);
    coef_.resize({2, channels_});
    coef_.copy_from(coef_host_);
  }
  if (add != nullptr) {
    backend.batchnorm_apply_add(g, x.data(), coef_.data(), add, masked_, y.data());
  } else {
    backend.batchnorm_apply(g, x.data(), coef_.data(), masked_, y.data());
  }
}

void BatchNorm2d::backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor* dx) {
  const BatchNormGeometry g = geometry(x.shape());
  const float* masked = masked_ ? y.data() : nullptr;
  if (on_device_) {
    backend.batchnorm_train_backward(g, train_state(), x.data(), masked, dy.data(),
                                     weight_.grad.data(), bias_.grad.data(),
                                     dx != nullptr ? dx->data() : nullptr);
    return;
  }
  // A backward through evaluation's statistics (rare: e.g. gradient checks
  // of a frozen model) takes them to the host.
  if (!training_) running_statistics();
  LOCKSTEP_CHECK(channels_host_.size() == static_cast<size_t>(channels_),
                 "backward before forward");
  const auto C = static_cast<size_t>(channels_);
  coef_host_.resize({5, channels_});
  float* k = coef_host_.data();
  for (size_t c = 0; c < C; ++c) {
    k[c] = static_cast<float>(channels_host_[c].mean);
    k[C + c] = static_cast<float>(channels_host_[c].invstd);
  }
  coef_.resize({5, channels_});
  coef_.copy_from(coef_host_);
  if (weight_.exact != nullptr) {
    const std::vector<double> sums =
        exact_backward_sums(backend, g, x.data(), masked, dy.data(), coef_.data(), *weight_.exact,
                            *bias_.exact, reducer_, name() + " backward sums");
    if (dx != nullptr) backward_apply(backend, g, x, masked, dy, sums, *dx);
    return;
  }
  std::vector<double> sums(2 * C);
  backend.batchnorm_backward_sums(g, x.data(), masked, dy.data(), coef_.data(), sums.data(),
                                  sums.data() + C);
  Tensor dw({channels_}), db({channels_});
  for (size_t c = 0; c < C; ++c) {
    db.data()[c] = static_cast<float>(sums[c]);
    dw.data()[c] = static_cast<float>(sums[C + c]);
  }
  weight_.grad.copy_from(dw);
  bias_.grad.copy_from(db);
  if (dx == nullptr) return;
  if (reducer_ != nullptr) reducer_->sum(sums, name() + " backward sums");
  backward_apply(backend, g, x, masked, dy, sums, *dx);
}

// dx from the (reduced) sums of dy and dy * xhat.
void BatchNorm2d::backward_apply(Backend& backend, const BatchNormGeometry& g, const Tensor& x,
                                 const float* masked, const Tensor& dy,
                                 const std::vector<double>& sums, Tensor& dx) {
  const auto C = static_cast<size_t>(channels_);
  float* k = coef_host_.data();
  Tensor w({channels_});
  w.copy_from(weight_.value);
  // Evaluation-mode statistics are constants: only the scale remains.
  const double inv_count = training_ ? 1.0 / count_ : 0.0;
  for (size_t c = 0; c < C; ++c) {
    batchnorm_channel_backward(channels_host_[c], w.data()[c], sums[c], sums[C + c], inv_count,
                               k[2 * C + c], k[3 * C + c], k[4 * C + c]);
  }
  coef_.copy_from(coef_host_);
  backend.batchnorm_backward_apply(g, x.data(), masked, dy.data(), coef_.data(), dx.data());
}

void pair_batchnorm_conv(Layer& previous, Layer& next) {
  auto* bn = dynamic_cast<BatchNorm2d*>(&previous);
  auto* conv = dynamic_cast<Conv2d*>(&next);
  if (bn != nullptr && conv != nullptr) bn->map_into(*conv);
}

void BatchNorm2d::reset_parameters(uint64_t, Device device) {
  weight_.name = name() + ".weight";
  bias_.name = name() + ".bias";
  running_mean_.name = name() + ".running_mean";
  running_var_.name = name() + ".running_var";
  num_batches_tracked_.name = name() + ".num_batches_tracked";
  for (Parameter* p : {&weight_, &bias_}) {
    p->value = Tensor({channels_}, device);
    p->grad = Tensor({channels_}, device);
  }
  Tensor ones({channels_});
  for (float& v : ones.span()) v = 1.0f;
  weight_.value.copy_from(ones);
  running_mean_.value = Tensor({channels_}, device);
  running_var_.value = Tensor({channels_}, device);
  running_var_.value.copy_from(ones);
  num_batches_tracked_.value = Tensor(Shape{}, device);
  coef_ = Tensor({5, channels_}, device);
  coef_host_ = Tensor({5, channels_});
  // (2, C) doubles in floats' storage (Tensor allocations are aligned for doubles).
  stats_ = Tensor({4 * channels_}, device);
}

namespace {

// eval mode: y = relu?((x - running_mean) / sqrt(running_var + eps) * weight + bias)
std::vector<OnnxNode> batch_norm2d_onnx(BatchNorm2d& bn) {
  std::vector<std::string> inputs = parameter_names(bn);  // scale, B
  for (const Buffer* b : bn.buffers()) {
    if (!b->name.ends_with(".num_batches_tracked")) inputs.push_back(b->name);  // mean, var
  }
  std::vector<OnnxNode> nodes = {
      {.op = "BatchNormalization", .initializers = inputs, .reals = {{"epsilon", bn.eps()}}}};
  if (bn.fused_relu()) nodes.push_back({.op = "Relu"});
  return nodes;
}

}  // namespace

const LayerType& batchnorm2d_layer_type() {
  static const LayerType type{
      .name = "batchnorm2d",
      .usage = "batchnorm2d [relu=false]",
      .summary = "batch normalisation (nn.BatchNorm2d); relu=true fuses the ReLU",
      .parameters = {"weight", "bias"},
      .input = LayerInput::kImage,
      .make = [](LayerArgs& args, const Shape& in) -> std::unique_ptr<Layer> {
        return std::make_unique<BatchNorm2d>(in[1], args.flag("relu", false));
      },
      .onnx = onnx_for<BatchNorm2d>(batch_norm2d_onnx)};
  return type;
}

}  // namespace lockstep::nn
