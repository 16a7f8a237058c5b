// OpNames: a ForwardingBackend that keeps the name of every op it runs, in
// order, to count them (a fused op runs in place of the ops it joins).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/forwarding_backend.h"

namespace lockstep::testing {

class OpNames : public ForwardingBackend {
 public:
  explicit OpNames(std::unique_ptr<nn::Backend> inner) : ForwardingBackend(std::move(inner)) {}
  const std::vector<std::string>& ops() const { return ops_; }
  int count(const std::string& op) const {
    return static_cast<int>(std::count(ops_.begin(), ops_.end(), op));
  }

 protected:
  void on_op(std::string_view op) override { ops_.emplace_back(op); }

 private:
  std::vector<std::string> ops_;
};

}  // namespace lockstep::testing
