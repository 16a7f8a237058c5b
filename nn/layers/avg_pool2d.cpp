#include "nn/layers/avg_pool2d.h"

#include "common/error.h"

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

}  // namespace lockstep::nn
