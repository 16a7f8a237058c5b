#include "nn/layers/linear.h"

#include <cmath>

#include "common/error.h"
#include "nn/exact_sum.h"
#include "nn/layer_registry.h"

namespace lockstep::nn {

Linear::Linear(int64_t in_features, int64_t out_features) : in_(in_features), out_(out_features) {
  if (in_features <= 0 || out_features <= 0) {
    fail_input("linear: invalid sizes in=", in_features, " out=", out_features);
  }
}

std::string Linear::describe() const {
  return detail::concat("linear(", in_, "->", out_, ")");
}

Shape Linear::output_shape(const Shape& input) const {
  if (input.size() != 2 || input[1] != in_) {
    fail_input(name(), " ", describe(), ": expects input (N, ", in_, "), got ", shape_string(input),
               " (is a flatten layer missing, or is `in` wrong?)");
  }
  return {input[0], out_};
}

void Linear::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  const int64_t n = x.dim(0);
  backend.gemm(false, true, n, out_, in_, 1.0f, x.data(), weight_.value.data(), 0.0f, y.data());
  backend.add_row_bias(n, out_, bias_.value.data(), y.data());
}

void Linear::backward(Backend& backend, const Tensor& x, const Tensor&, const Tensor& dy,
                      Tensor* dx) {
  const int64_t n = x.dim(0);
  if (weight_.exact != nullptr) {
    // Reproducible mode: each sample's outer product dy_s x_s^T, added to
    // the exact sums (grad is the scratch); a sample's bias gradient is dy_s.
    for (int64_t s = 0; s < n; ++s) {
      backend.gemm(true, false, out_, in_, 1, 1.0f, dy.data() + s * out_, x.data() + s * in_, 0.0f,
                   weight_.grad.data());
      weight_.exact->add(weight_.grad.data());
      bias_.exact->add(dy.data() + s * out_);
    }
  } else {
    backend.gemm(true, false, out_, in_, n, 1.0f, dy.data(), x.data(), 0.0f, weight_.grad.data());
    backend.sum_rows(n, out_, dy.data(), bias_.grad.data());
  }
  if (dx != nullptr) {
    backend.gemm(false, false, n, in_, out_, 1.0f, dy.data(), weight_.value.data(), 0.0f,
                 dx->data());
  }
}

void Linear::reset_parameters(uint64_t seed, Device device) {
  weight_.name = name() + ".weight";
  bias_.name = name() + ".bias";
  weight_.value = Tensor({out_, in_}, device);
  weight_.grad = Tensor({out_, in_}, device);
  bias_.value = Tensor({out_}, device);
  bias_.grad = Tensor({out_}, device);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  fill_uniform(weight_.value, bound, seed, weight_.name);
  fill_uniform(bias_.value, bound, seed, bias_.name);
}

const LayerType& linear_layer_type() {
  static const LayerType type{
      .name = "linear",
      .usage = "linear out=",
      .summary = "a fully connected layer, y = x W^T + b (nn.Linear)",
      .parameters = {"weight", "bias"},
      .input = LayerInput::kFlat,
      .make = [](LayerArgs& args, const Shape& in) -> std::unique_ptr<Layer> {
        return std::make_unique<Linear>(in[1], args.integer("out", 0, true));
      },
      .onnx = onnx_for<Linear>([](Linear& l) {
        return std::vector<OnnxNode>{
            {.op = "Gemm", .initializers = parameter_names(l), .integers = {{"transB", 1}}}};
      })};
  return type;
}

}  // namespace lockstep::nn
