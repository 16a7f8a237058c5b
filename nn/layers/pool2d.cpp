#include "nn/layers/pool2d.h"

#include "common/error.h"
#include "nn/layer_registry.h"

namespace lockstep::nn {

Pool2d::Pool2d(Mode mode, int64_t kernel, int64_t stride)
    : mode_(mode), kernel_(kernel), stride_(stride == 0 ? kernel : stride) {
  if (kernel <= 0 || stride_ <= 0) {
    fail_input(mode_ == Mode::kMax ? "max_pool2d" : "avg_pool2d", ": invalid kernel ", kernel,
               " or stride ", stride);
  }
}

std::string Pool2d::describe() const {
  return detail::concat(mode_ == Mode::kMax ? "max_pool2d" : "avg_pool2d", "(k", kernel_, ", s",
                        stride_, ")");
}

Pool2dGeometry Pool2d::geometry(const Shape& input) const {
  if (input.size() != 4 || input[2] < kernel_ || input[3] < kernel_) {
    fail_input(name(), " ", describe(), ": expects input (N, C, H, W) with H, W >= ", kernel_,
               ", got ", shape_string(input));
  }
  return {.batch = input[0],
          .channels = input[1],
          .in_h = input[2],
          .in_w = input[3],
          .kernel = kernel_,
          .stride = stride_};
}

Shape Pool2d::output_shape(const Shape& input) const {
  const Pool2dGeometry g = geometry(input);
  return {g.batch, g.channels, g.out_h(), g.out_w()};
}

void Pool2d::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  const Pool2dGeometry g = geometry(x.shape());
  if (mode_ == Mode::kMax) return backend.maxpool2d_forward(g, x.data(), y.data());
  backend.avgpool2d_forward(g, x.data(), y.data());
}

void Pool2d::backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                      Tensor* dx) {
  if (dx == nullptr) return;
  const Pool2dGeometry g = geometry(x.shape());
  if (mode_ == Mode::kMax) {
    return backend.maxpool2d_backward(g, x.data(), y.data(), dy.data(), dx->data());
  }
  backend.avgpool2d_backward(g, dy.data(), dx->data());
}

namespace {

// max_pool2d or avg_pool2d (Pool: MaxPool2d or AvgPool2d; op: its ONNX op).
template <typename Pool>
LayerType pool_type(const char* name, const char* summary, const char* op) {
  return {.name = name,
          .usage = std::string(name) + " kernel= [stride=kernel]",
          .summary = summary,
          .input = LayerInput::kImage,
          .make = [](LayerArgs& args, const Shape&) -> std::unique_ptr<Layer> {
            const int64_t kernel = args.integer("kernel", 0, true);
            return std::make_unique<Pool>(kernel, args.integer("stride", 0));
          },
          .onnx = onnx_for<Pool>([op](Pool& p) {
            const int64_t k = p.kernel(), s = p.stride();
            return std::vector<OnnxNode>{
                {.op = op, .ints = {{"kernel_shape", {k, k}}, {"strides", {s, s}}}}};
          })};
}

}  // namespace

const LayerType& max_pool2d_layer_type() {
  static const LayerType type =
      pool_type<MaxPool2d>("max_pool2d", "the maximum of each window", "MaxPool");
  return type;
}

const LayerType& avg_pool2d_layer_type() {
  static const LayerType type =
      pool_type<AvgPool2d>("avg_pool2d", "the mean of each window", "AveragePool");
  return type;
}

}  // namespace lockstep::nn
