// ResidualBlock: y = relu(main(x) + shortcut(x)), as the BasicBlock of He et
// al. 2016 (ReLU optional). The shortcut is
//   identity:   x
//   pad:        "option A" of the CIFAR ResNets: every stride-th pixel of x
//               with (out - in) / 2 zero channels in front and the rest
//               after (no parameters)
//   projection: a Sequential (1x1 convolution + BatchNorm), named
//               "<name>.shortcut.0", "<name>.shortcut.1" as in PyTorch
// The main path's children are named directly under the block
// ("layer1.0.conv1"). Parameters are the main path's, then the shortcut's.
// Backward: g = dy * (y > 0); the shortcut's backward runs first, then the
// main path's, so gradients are announced in the reverse of parameters();
// dx = dmain + dshortcut.
// When the main path ends in a BatchNorm2d without a ReLU of its own (bn2),
// that BatchNorm adds the shortcut and applies the block's ReLU in its apply
// pass (BatchNorm2d::set_next_residual), and its backward masks dy by
// y > 0; an identity shortcut's gradient is added to dx masked in the same
// pass (Backend::relu_backward_accumulate). The bits are those of the
// separate passes.
#pragma once

#include <memory>

#include "nn/layers/batch_norm2d.h"
#include "nn/layers/sequential.h"

namespace lockstep::nn {

enum class ShortcutKind { kIdentity, kPad, kProjection };

class ResidualBlock final : public Composite {
 public:
  // kPad: out_channels and stride give the shortcut's output; kProjection:
  // projection is the shortcut (not null); kIdentity: neither.
  ResidualBlock(std::unique_ptr<Sequential> main, ShortcutKind kind,
                std::unique_ptr<Sequential> projection, int64_t out_channels, int64_t stride,
                bool relu, std::string what);

  void set_name(std::string name) override;
  std::string describe() const override { return what_; }
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward_announcing(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor* dx, const GradReady& ready) override;
  void summarize(const Shape& input, int depth, std::vector<SummaryRow>& rows) override;
  // The main path, then the projection (kProjection only).
  std::vector<Layer*> children() const override;

  Sequential& main_path() const { return *main_; }
  Sequential* projection() const { return projection_.get(); }  // kProjection only
  ShortcutKind shortcut_kind() const { return kind_; }
  int64_t out_channels() const { return out_channels_; }
  int64_t stride() const { return stride_; }
  bool fused_relu() const { return relu_; }

 private:
  void reset_scratch(Device device) override;
  ChannelPadGeometry pad_geometry(const Shape& input) const;
  Shape shortcut_shape(const Shape& input) const;

  std::unique_ptr<Sequential> main_, projection_;
  BatchNorm2d* tail_ = nullptr;  // the main path's last layer when it takes the add
  ShortcutKind kind_;
  int64_t out_channels_, stride_;
  bool relu_;
  std::string what_;
  Tensor main_out_, short_out_;  // outputs of the two branches (main_out_: without tail_)
  Tensor grad_, short_dx_;       // gradient at the sum; the shortcut's dx
};

}  // namespace lockstep::nn
