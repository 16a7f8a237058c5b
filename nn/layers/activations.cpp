#include "nn/layers/activations.h"

#include <algorithm>

#include "common/error.h"
#include "nn/layer_registry.h"

namespace lockstep::nn {

void ReLU::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  backend.relu_forward(x.numel(), x.data(), y.data());
}

void ReLU::backward(Backend& backend, const Tensor&, const Tensor& y, const Tensor& dy,
                    Tensor* dx) {
  if (dx != nullptr) backend.relu_backward(y.numel(), y.data(), dy.data(), dx->data());
}

Shape LogSoftmax::output_shape(const Shape& input) const {
  if (input.size() != 2) {
    fail_input(name(), " log_softmax: expects input (N, classes), got ", shape_string(input));
  }
  return input;
}

void LogSoftmax::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  backend.log_softmax_forward(x.dim(0), x.dim(1), x.data(), y.data());
}

void LogSoftmax::backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                          Tensor* dx) {
  if (dx != nullptr) {
    backend.log_softmax_backward(x.dim(0), x.dim(1), y.data(), dy.data(), dx->data());
  }
}

Shape Flatten::output_shape(const Shape& input) const {
  if (input.empty()) fail_input(name(), " flatten: empty input shape");
  return {input[0], shape_numel(input) / std::max<int64_t>(input[0], 1)};
}

void Flatten::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  backend.copy(x.numel(), x.data(), y.data());
}

void Flatten::backward(Backend& backend, const Tensor& x, const Tensor&, const Tensor& dy,
                       Tensor* dx) {
  if (dx != nullptr) backend.copy(x.numel(), dy.data(), dx->data());
}

const LayerType& relu_layer_type() {
  static const LayerType type{
      .name = "relu",
      .usage = "relu",
      .summary = "max(x, 0)",
      .make = [](LayerArgs&, const Shape&) -> std::unique_ptr<Layer> {
        return std::make_unique<ReLU>();
      },
      .onnx = onnx_for<ReLU>([](ReLU&) { return std::vector<OnnxNode>{{.op = "Relu"}}; })};
  return type;
}

const LayerType& flatten_layer_type() {
  static const LayerType type{
      .name = "flatten",
      .usage = "flatten",
      .summary = "(N, C, H, W) to (N, C*H*W)",
      .make = [](LayerArgs&, const Shape&) -> std::unique_ptr<Layer> {
        return std::make_unique<Flatten>();
      },
      .onnx = onnx_for<Flatten>([](Flatten&) {
        return std::vector<OnnxNode>{{.op = "Flatten", .integers = {{"axis", 1}}}};
      })};
  return type;
}

const LayerType& log_softmax_layer_type() {
  static const LayerType type{
      .name = "log_softmax",
      .usage = "log_softmax",
      .summary = "log-probabilities over the classes of each row",
      .make = [](LayerArgs&, const Shape&) -> std::unique_ptr<Layer> {
        return std::make_unique<LogSoftmax>();
      },
      .onnx = onnx_for<LogSoftmax>([](LogSoftmax&) {
        return std::vector<OnnxNode>{{.op = "LogSoftmax", .integers = {{"axis", 1}}}};
      })};
  return type;
}

}  // namespace lockstep::nn
