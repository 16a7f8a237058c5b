// Dropout (element-wise, nn.Dropout) and channel-wise dropout (nn.Dropout2d).
//   training: y = x * mask, mask = keep ? 1 / (1 - p) : 0
//   inference: y = x
//   dx = dy * mask
// Element-wise: one decision per element of each sample. Channel-wise: one
// decision per (sample, channel), shared by its H x W plane.
//
// The decision is a pure function of (run seed, layer index, epoch, dataset
// index of the sample, element): a sample gets the same mask whichever rank
// or batch row it lands in, so N ranks at batch B match 1 rank at batch N*B.
#pragma once

#include "nn/layer.h"

namespace lockstep::nn {

class Dropout final : public Layer {
 public:
  Dropout(float p, bool channelwise);

  std::string describe() const override;
  Shape output_shape(const Shape& input) const override { return input; }
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

 private:
  DropoutGeometry geometry(const Shape& input, const ForwardContext& ctx) const;
  float p_;
  bool channelwise_;
  bool last_training_ = false;
  DropoutGeometry last_;
  Tensor mask_;  // (N, C) of the last training forward
};

}  // namespace lockstep::nn
