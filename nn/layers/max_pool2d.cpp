#include "nn/layers/max_pool2d.h"

#include "nn/error.h"
#include "nn/layers/pool_geometry.h"

namespace lockstep::nn {

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride)
    : kernel_(kernel), stride_(stride == 0 ? kernel : stride) {
  if (kernel <= 0 || stride_ <= 0) {
    fail_input("max_pool2d: invalid kernel ", kernel, " or stride ", stride);
  }
}

std::string MaxPool2d::describe() const {
  return detail::concat("max_pool2d(k", kernel_, ", s", stride_, ")");
}

Pool2dGeometry MaxPool2d::geometry(const Shape& input) const {
  return pool_geometry(*this, kernel_, stride_, input);
}

Shape MaxPool2d::output_shape(const Shape& input) const {
  const Pool2dGeometry g = geometry(input);
  return {g.batch, g.channels, g.out_h(), g.out_w()};
}

void MaxPool2d::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  backend.maxpool2d_forward(geometry(x.shape()), x.data(), y.data());
}

void MaxPool2d::backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor* dx) {
  if (dx == nullptr) return;
  backend.maxpool2d_backward(geometry(x.shape()), x.data(), y.data(), dy.data(), dx->data());
}

}  // namespace lockstep::nn
