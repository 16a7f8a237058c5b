#include "nn/layers/dropout.h"

#include <algorithm>

#include "common/error.h"
#include "nn/counter_rng.h"
#include "nn/layer_registry.h"

namespace lockstep::nn {

Dropout::Dropout(float p, bool channelwise) : p_(p), channelwise_(channelwise) {
  if (!(p >= 0.0f && p < 1.0f)) fail_input("dropout: p must be in [0, 1), got ", p);
}

std::string Dropout::describe() const {
  return detail::concat(channelwise_ ? "dropout2d(p=" : "dropout(p=", p_, ")");
}

DropoutGeometry Dropout::geometry(const Shape& input, const ForwardContext& ctx) const {
  if (channelwise_ && input.size() != 4) {
    fail_input(name(), " ", describe(), ": expects input (N, C, H, W), got ", shape_string(input));
  }
  DropoutGeometry g;
  g.batch = input.at(0);
  g.channels = channelwise_ ? input[1] : shape_numel(input) / std::max<int64_t>(g.batch, 1);
  g.spatial = channelwise_ ? input[2] * input[3] : 1;
  g.p = p_;
  g.seed = ctx.seed;
  g.stream = hash_combine(static_cast<uint64_t>(index()), ctx.epoch);
  return g;
}

void Dropout::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  last_training_ = ctx.training && p_ > 0.0f;
  if (!last_training_) {
    backend.copy(x.numel(), x.data(), y.data());
    return;
  }
  LOCKSTEP_CHECK(ctx.sample_ids != nullptr || ctx.device_sample_ids != nullptr,
                 "dropout in training needs sample ids");
  last_ = geometry(x.shape(), ctx);
  if (mask_.device() != x.device()) mask_ = Tensor({}, x.device());
  mask_.resize({last_.batch, last_.channels});
  if (ctx.device_sample_ids != nullptr) {
    backend.dropout_forward_device_ids(last_, ctx.device_sample_ids, x.data(), y.data(),
                                       mask_.data());
  } else {
    backend.dropout_forward(last_, ctx.sample_ids, x.data(), y.data(), mask_.data());
  }
}

void Dropout::backward(Backend& backend, const Tensor& x, const Tensor&, const Tensor& dy,
                       Tensor* dx) {
  if (dx == nullptr) return;
  if (!last_training_) {
    backend.copy(x.numel(), dy.data(), dx->data());
    return;
  }
  backend.dropout_backward(last_, mask_.data(), dy.data(), dx->data());
}

namespace {

// Dropout (channelwise false) or Dropout2d; inference: the identity, no node.
LayerType dropout_type(bool channelwise) {
  return {.name = channelwise ? "dropout2d" : "dropout",
          .usage = channelwise ? "dropout2d [p=0.5]" : "dropout [p=0.5]",
          .summary = channelwise ? "drops whole channels with probability p (nn.Dropout2d)"
                                 : "drops elements with probability p (nn.Dropout)",
          .make = [channelwise](LayerArgs& args, const Shape&) -> std::unique_ptr<Layer> {
            return std::make_unique<Dropout>(args.real("p", 0.5f), channelwise);
          },
          .onnx = onnx_for<Dropout>([](Dropout&) { return std::vector<OnnxNode>{}; })};
}

}  // namespace

const LayerType& dropout_layer_type() {
  static const LayerType type = dropout_type(false);
  return type;
}

const LayerType& dropout2d_layer_type() {
  static const LayerType type = dropout_type(true);
  return type;
}

}  // namespace lockstep::nn
