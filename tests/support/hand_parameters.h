// Parameters whose values and gradients a test sets by hand, for the
// optimizer and clipping tests.
#pragma once

#include <vector>

#include "nn/layer.h"
#include "nn/tensor.h"

namespace lockstep::testing {

// A 2-D weight ("fc.weight", 1 x 2) and a 1-D bias ("fc.bias").
struct WeightAndBias {
  nn::Parameter weight{"fc.weight", nn::Tensor({1, 2}), nn::Tensor({1, 2})};
  nn::Parameter bias{"fc.bias", nn::Tensor({1}), nn::Tensor({1})};
  std::vector<nn::Parameter*> list() { return {&weight, &bias}; }
  // Every value w, every gradient g.
  void set(float w, float g) {
    for (nn::Parameter* p : list()) {
      for (float& v : p->value.span()) v = w;
      for (float& v : p->grad.span()) v = g;
    }
  }
};

}  // namespace lockstep::testing
