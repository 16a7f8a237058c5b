#include "nn/layers/avg_pool2d.h"

#include "common/error.h"
#include "nn/layer_registry.h"

namespace lockstep::nn {

Shape GlobalAvgPool2d::output_shape(const Shape& input) const {
  if (input.size() != 4) {
    fail_input(name(), " ", describe(), ": expects input (N, C, H, W), got ", shape_string(input));
  }
  return {input[0], input[1]};
}

void GlobalAvgPool2d::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  output_shape(x.shape());
  backend.row_mean_forward(x.dim(0) * x.dim(1), x.dim(2) * x.dim(3), x.data(), y.data());
}

void GlobalAvgPool2d::backward(Backend& backend, const Tensor& x, const Tensor&, const Tensor& dy,
                               Tensor* dx) {
  if (dx == nullptr) return;
  backend.row_mean_backward(x.dim(0) * x.dim(1), x.dim(2) * x.dim(3), dy.data(), dx->data());
}

const LayerType& global_avg_pool2d_layer_type() {
  static const LayerType type{.name = "global_avg_pool2d",
                              .usage = "global_avg_pool2d",
                              .summary = "the mean of each channel, (N, C, H, W) to (N, C)",
                              .input = LayerInput::kImage,
                              .make = [](LayerArgs&, const Shape&) -> std::unique_ptr<Layer> {
                                return std::make_unique<GlobalAvgPool2d>();
                              },
                              .onnx = onnx_for<GlobalAvgPool2d>([](GlobalAvgPool2d&) {
                                return std::vector<OnnxNode>{
                                    {.op = "GlobalAveragePool"},
                                    {.op = "Flatten", .integers = {{"axis", 1}}}};
                              })};
  return type;
}

}  // namespace lockstep::nn
