// Layer: one operation of a sequential model, forward and backward side by
// side. Parameters are named like PyTorch's state_dict ("conv1.weight") so
// checkpoints and logs speak the same names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/tensor.h"

namespace lockstep::nn {

struct Parameter {
  std::string name;  // "conv1.weight"
  Tensor value;
  Tensor grad;  // same shape; overwritten by each backward
};

// What a forward pass needs to know besides its input.
struct ForwardContext {
  bool training = false;
  uint64_t seed = 0;                    // run seed: dropout masks derive from it
  uint64_t epoch = 0;                   // dropout masks change every epoch
  const int64_t* sample_ids = nullptr;  // host, one dataset index per batch row
};

class Layer {
 public:
  virtual ~Layer() = default;

  // The name parameters are prefixed with ("conv1"); set by the model.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  // Position in the model; distinguishes the dropout streams of layers.
  int64_t index() const { return index_; }
  void set_index(int64_t index) { index_ = index; }

  // Short human description: "conv2d(1->10, k5, s1, p0)".
  virtual std::string describe() const = 0;
  // Output shape (N, ...) for an input shape (N, ...); throws InputError on
  // a shape this layer cannot take.
  virtual Shape output_shape(const Shape& input) const = 0;
  // y is resized by the caller to output_shape(x.shape()).
  virtual void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) = 0;
  // Writes the parameter gradients and, when dx is not null, the input
  // gradient (already sized like x). x and y are the tensors of the last
  // forward.
  virtual void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                        Tensor* dx) = 0;

  virtual std::vector<Parameter*> parameters() { return {}; }
  // Creates parameters on `device` with PyTorch's default initialisation
  // distribution, drawn from a counter-based generator keyed by (seed, name).
  virtual void reset_parameters(uint64_t seed, Device device) {}

 private:
  std::string name_;
  int64_t index_ = 0;
};

// Fills t (any device) with U(-bound, bound) from a counter-based generator
// keyed by (seed, key).
void fill_uniform(Tensor& t, float bound, uint64_t seed, const std::string& key);

}  // namespace lockstep::nn
