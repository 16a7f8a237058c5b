// Conv2d: y = conv(x, W) + b (cross-correlation, zero padding), as PyTorch's
// nn.Conv2d.
//   x: (N, C, H, W), W: (K, C, R, S), b: (K), y: (N, K, P, Q)
//   P = (H + 2 pad - R) / stride + 1, Q likewise
// Gradients: dx = conv_transpose(dy, W), dW = correlate(x, dy), db = sum dy.
// Initialisation (PyTorch default): W, b ~ U(-1/sqrt(C R S), 1/sqrt(C R S)).
// Without bias (bias = false, as before a BatchNorm) there is no b.
#pragma once

#include "nn/layer.h"

namespace lockstep::nn {

class Conv2d final : public Layer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1,
         int64_t pad = 0, bool bias = true);

  std::string describe() const override;
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  std::vector<Parameter*> parameters() override {
    if (has_bias_) return {&weight_, &bias_};
    return {&weight_};
  }
  void reset_parameters(uint64_t seed, Device device) override;

  int64_t kernel() const { return kernel_; }
  int64_t stride() const { return stride_; }
  int64_t pad() const { return pad_; }

  // Whether backend reads this convolution's input for `input` through a
  // map (Backend::conv2d_maps_input).
  bool maps_input(const Backend& backend, const Shape& input) const;
  // For the next forward and its backward (where maps_input): the input is
  // source through map, read as the convolution goes; the x they are given
  // is not read (nor written by the layer before). source: alive until
  // that backward (a BatchNorm2d's input, whose apply pass this takes);
  // null: x as given.
  void set_next_input(const Tensor* source, const ConvInputMap& map) {
    next_source_ = source;
    next_map_ = map;
  }

 private:
  void add_sample_grads(Backend& backend, Conv2dGeometry g, const Tensor& x, const Tensor& dy);
  // The weight gradient (and the bias's) of x, mapped as the last forward's.
  void filter_grad(Backend& backend, const Conv2dGeometry& g, const float* x, const float* dy);
  Conv2dGeometry geometry(const Shape& input) const;
  int64_t in_channels_, out_channels_, kernel_, stride_, pad_;
  bool has_bias_;
  Parameter weight_, bias_;
  const Tensor* next_source_ = nullptr;  // set_next_input, for the next forward
  ConvInputMap next_map_;
  const Tensor* source_ = nullptr;  // the last forward's mapped input (null: x as given)
  ConvInputMap map_;
};

}  // namespace lockstep::nn
