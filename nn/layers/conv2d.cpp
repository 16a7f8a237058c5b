#include "nn/layers/conv2d.h"

#include <cmath>
#include <utility>

#include "common/error.h"
#include "nn/exact_sum.h"
#include "nn/layer_registry.h"

namespace lockstep::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
               int64_t pad, bool bias)
    : in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_(kernel),
      stride_(stride),
      pad_(pad),
      has_bias_(bias) {
  if (in_channels <= 0 || out_channels <= 0 || kernel <= 0 || stride <= 0 || pad < 0) {
    fail_input("conv2d: invalid arguments in=", in_channels, " out=", out_channels,
               " kernel=", kernel, " stride=", stride, " pad=", pad);
  }
}

std::string Conv2d::describe() const {
  return detail::concat("conv2d(", in_channels_, "->", out_channels_, ", k", kernel_, ", s",
                        stride_, ", p", pad_, has_bias_ ? ")" : ", no bias)");
}

Conv2dGeometry Conv2d::geometry(const Shape& input) const {
  if (input.size() != 4 || input[1] != in_channels_) {
    fail_input(name(), " ", describe(), ": expects input (N, ", in_channels_, ", H, W), got ",
               shape_string(input));
  }
  Conv2dGeometry g;
  g.batch = input[0];
  g.in_channels = in_channels_;
  g.in_h = input[2];
  g.in_w = input[3];
  g.out_channels = out_channels_;
  g.kernel_h = g.kernel_w = kernel_;
  g.stride = stride_;
  g.pad = pad_;
  if (g.in_h + 2 * pad_ < kernel_ || g.in_w + 2 * pad_ < kernel_) {
    fail_input(name(), " ", describe(), ": input ", shape_string(input),
               " is smaller than the kernel");
  }
  return g;
}

Shape Conv2d::output_shape(const Shape& input) const {
  const Conv2dGeometry g = geometry(input);
  return {g.batch, out_channels_, g.out_h(), g.out_w()};
}

bool Conv2d::maps_input(const Backend& backend, const Shape& input) const {
  return backend.conv2d_maps_input(geometry(input));
}

void Conv2d::forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext&) {
  source_ = std::exchange(next_source_, nullptr);
  map_ = next_map_;
  const Conv2dGeometry g = geometry(x.shape());
  const float* b = has_bias_ ? bias_.value.data() : nullptr;
  if (source_ != nullptr) {
    LOCKSTEP_CHECK(source_->shape() == x.shape(), name(), ": a mapped input of ",
                   shape_string(source_->shape()), " for ", shape_string(x.shape()));
    backend.conv2d_forward_mapped(g, map_, source_->data(), weight_.value.data(), b, y.data());
    return;
  }
  backend.conv2d_forward(g, x.data(), weight_.value.data(), b, y.data());
}

void Conv2d::backward(Backend& backend, const Tensor& x, const Tensor&, const Tensor& dy,
                      Tensor* dx) {
  const Conv2dGeometry g = geometry(x.shape());
  const Tensor& input = source_ != nullptr ? *source_ : x;
  if (weight_.exact != nullptr) {
    add_sample_grads(backend, g, input, dy);
  } else {
    filter_grad(backend, g, input.data(), dy.data());
  }
  if (dx != nullptr) backend.conv2d_backward_data(g, weight_.value.data(), dy.data(), dx->data());
}

void Conv2d::filter_grad(Backend& backend, const Conv2dGeometry& g, const float* x,
                         const float* dy) {
  float* db = has_bias_ ? bias_.grad.data() : nullptr;
  if (source_ != nullptr) {
    backend.conv2d_backward_filter_mapped(g, map_, x, dy, weight_.grad.data(), db);
  } else {
    backend.conv2d_backward_filter(g, x, dy, weight_.grad.data(), db);
  }
}

// Reproducible mode: one filter gradient per sample (batch 1, so what a
// sample contributes does not depend on the batch it came in), each added to
// the exact sums; grad is the scratch.
void Conv2d::add_sample_grads(Backend& backend, Conv2dGeometry g, const Tensor& x,
                              const Tensor& dy) {
  const int64_t samples = g.batch;
  g.batch = 1;
  const int64_t x_stride = g.in_channels * g.in_h * g.in_w;
  const int64_t y_stride = g.out_channels * g.out_h() * g.out_w();
  for (int64_t s = 0; s < samples; ++s) {
    filter_grad(backend, g, x.data() + s * x_stride, dy.data() + s * y_stride);
    weight_.exact->add(weight_.grad.data());
    if (has_bias_) bias_.exact->add(bias_.grad.data());
  }
}

void Conv2d::reset_parameters(uint64_t seed, Device device) {
  weight_.name = name() + ".weight";
  bias_.name = name() + ".bias";
  weight_.value = Tensor({out_channels_, in_channels_, kernel_, kernel_}, device);
  weight_.grad = Tensor(weight_.value.shape(), device);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_channels_ * kernel_ * kernel_));
  fill_uniform(weight_.value, bound, seed, weight_.name);
  if (!has_bias_) return;
  bias_.value = Tensor({out_channels_}, device);
  bias_.grad = Tensor({out_channels_}, device);
  fill_uniform(bias_.value, bound, seed, bias_.name);
}

const LayerType& conv2d_layer_type() {
  static const LayerType type{
      .name = "conv2d",
      .usage = "conv2d out= kernel= [stride=1] [pad=0] [bias=true]",
      .summary = "a 2-D convolution (nn.Conv2d, square kernel)",
      .parameters = {"weight", "bias"},
      .input = LayerInput::kImage,
      .make = [](LayerArgs& args, const Shape& in) -> std::unique_ptr<Layer> {
        const int64_t out = args.integer("out", 0, true);
        const int64_t kernel = args.integer("kernel", 0, true);
        const int64_t stride = args.integer("stride", 1);
        const int64_t pad = args.integer("pad", 0);
        return std::make_unique<Conv2d>(in[1], out, kernel, stride, pad, args.flag("bias", true));
      },
      .onnx = onnx_for<Conv2d>([](Conv2d& c) {
        const int64_t k = c.kernel(), s = c.stride(), p = c.pad();
        return std::vector<OnnxNode>{
            {.op = "Conv",
             .initializers = parameter_names(c),  // weight[, bias]
             .ints = {{"kernel_shape", {k, k}}, {"strides", {s, s}}, {"pads", {p, p, p, p}}}}};
      })};
  return type;
}

}  // namespace lockstep::nn
