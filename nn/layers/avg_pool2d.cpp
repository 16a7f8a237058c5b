#include "nn/layers/avg_pool2d.h"

#include "nn/error.h"
#include "nn/layers/pool_geometry.h"

namespace lockstep::nn {

AvgPool2d::AvgPool2d(int64_t kernel, int64_t stride)
    : kernel_(kernel), stride_(stride == 0 ? kernel : stride) {
  if (kernel <= 0 || stride_ <= 0) {
    fail_input("avg_pool2d: invalid kernel ", kernel, " or stride ", stride);
  }
}

std::string AvgPool2d::describe() const {
  return detail::concat("avg_pool2d(k", kernel_, ", s", stride_, ")");
}

Pool2dGeometry AvgPool2d::geometry(const Shape& input) const {
  return pool_geometry(*this, kernel_, stride_, input);
}

Shape AvgPool2d::output_shape(const Shape& input) const {
  const Pool2dGeometry g = geometry(input);
  return {g.batch, g.channels, g.out_h(), g.out_w()};
}

void AvgPool2d::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  backend.avgpool2d_forward(geometry(x.shape()), x.data(), y.data());
}

void AvgPool2d::backward(Backend& backend, const Tensor& x, const Tensor&, const Tensor& dy,
                         Tensor* dx) {
  if (dx == nullptr) return;
  backend.avgpool2d_backward(geometry(x.shape()), dy.data(), dx->data());
}

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
