// CountingBackend: a ForwardingBackend that counts the host traffic its
// callers ask for, at the Backend boundary, by the marks of nn/backend.h:
// [host read] ops count one wait and one read, [host wait] one wait,
// [host write] one write. On the CPU, where the backend itself makes none
// (Backend::host_traffic() is zero), this shows the decision points a GPU
// would pay for. host_traffic() returns these counts, not the inner
// backend's; ops() names the counted ops in order, for failure messages.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/forwarding_backend.h"

namespace lockstep::testing {

class CountingBackend final : public ForwardingBackend {
 public:
  explicit CountingBackend(std::unique_ptr<nn::Backend> inner)
      : ForwardingBackend(std::move(inner)) {}

  nn::HostTraffic host_traffic() const override { return counts_; }
  const std::vector<std::string>& ops() const { return ops_; }

  // The traffic of each marked op (nn/backend.h).
  static const std::map<std::string, nn::HostTraffic, std::less<>>& marks() {
    static const std::map<std::string, nn::HostTraffic, std::less<>> table = {
        {"batchnorm_stats", {.waits = 1, .reads = 1}},
        {"batchnorm_backward_sums", {.waits = 1, .reads = 1}},
        {"nll_loss", {.waits = 1, .reads = 1}},
        {"softmax_cross_entropy", {.waits = 1, .reads = 1}},
        {"any_non_finite", {.waits = 1, .reads = 1}},
        {"download", {.waits = 1, .reads = 1}},
        {"synchronize", {.waits = 1}},
        {"dropout_forward", {.writes = 1}},
        {"upload", {.writes = 1}},
    };
    return table;
  }

 protected:
  void on_op(std::string_view op) override {
    const auto mark = marks().find(op);
    if (mark == marks().end()) return;
    counts_.waits += mark->second.waits;
    counts_.reads += mark->second.reads;
    counts_.writes += mark->second.writes;
    ops_.emplace_back(op);
  }

 private:
  nn::HostTraffic counts_;
  std::vector<std::string> ops_;
};

}  // namespace lockstep::testing
