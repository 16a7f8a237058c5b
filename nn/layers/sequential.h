// Sequential: a composite node that runs its children in order, as
// PyTorch's nn.Sequential. Children are named "<name>.<local name>"
// ("layer1.0" + "conv1" -> "layer1.0.conv1"); with an empty name, just the
// local name. Backward runs the children last first and announces each
// child's gradients as soon as that child is done.
//   x: the first child's input; y: the last child's output.
#pragma once

#include <memory>

#include "nn/layers/composite.h"

namespace lockstep::nn {

// The two tensors a Sequential's backward passes gradients through between
// its children. Sequentials at the same depth of a model never run their
// backward at once (neither contains the other, and each one's gradients
// in and out are its parent's), so they may share one pair
// (share_spare_gradients): resnet20's nine blocks hold two tensors instead
// of eighteen.
struct SpareGradients {
  Tensor a, b;
};

class Sequential final : public Composite {
 public:
  // Appends a child; local names must be unique (InputError otherwise).
  void add(std::string local_name, std::unique_ptr<Layer> layer);
  bool empty() const { return children_.empty(); }
  size_t size() const { return children_.size(); }

  void set_name(std::string name) override;
  std::string describe() const override { return "sequential"; }
  Shape output_shape(const Shape& input) const override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward_announcing(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor* dx, const GradReady& ready) override;
  void summarize(const Shape& input, int depth, std::vector<SummaryRow>& rows) override;
  // The children's rows only, at `depth`.
  void summarize_children(const Shape& input, int depth, std::vector<SummaryRow>& rows);

  std::vector<Layer*> children() const override;
  const std::shared_ptr<SpareGradients>& spare_gradients() const { return spare_; }
  void set_spare_gradients(std::shared_ptr<SpareGradients> spare) { spare_ = std::move(spare); }

 private:
  void reset_scratch(Device device) override;

  struct Child {
    std::string local_name;
    std::unique_ptr<Layer> layer;
  };
  std::vector<Child> children_;
  std::vector<Tensor> activations_;  // output of every child but the last
  std::shared_ptr<SpareGradients> spare_ = std::make_shared<SpareGradients>();
};

// Gives every Sequential among layers and their descendants the pair of
// the others at its depth (layers: depth 0; a composite's children: one
// deeper).
void share_spare_gradients(const std::vector<Layer*>& layers);

}  // namespace lockstep::nn
