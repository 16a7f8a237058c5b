// tests/support/forwarding_backend.h: every op reaches the inner backend,
// named to on_op first, so a fake that watches ops by name sees them all.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "support/forwarding_backend.h"

namespace lockstep::testing {
namespace {

class OpRecorder final : public ForwardingBackend {
 public:
  OpRecorder() : ForwardingBackend(nn::make_cpu_backend(1)) {}
  std::vector<std::string> ops;

 protected:
  void on_op(std::string_view op) override { ops.emplace_back(op); }
};

TEST(ForwardingBackend, EveryOpRunsOnTheInnerBackendAfterOnOpNamesIt) {
  OpRecorder backend;
  std::vector<float> x(4), y(4);
  backend.fill(4, -2.0f, x.data());
  backend.relu_forward(4, x.data(), y.data());
  backend.axpy(4, 3.0f, x.data(), y.data());
  const nn::ConstFloats arrays[] = {{y.data(), 4}};
  EXPECT_FALSE(backend.any_non_finite(arrays));
  backend.synchronize();
  EXPECT_EQ(y, std::vector<float>(4, -6.0f));  // relu(-2) = 0, then 0 + 3 * -2
  EXPECT_EQ(backend.ops, (std::vector<std::string>{"fill", "relu_forward", "axpy", "any_non_finite",
                                                   "synchronize"}));
  EXPECT_EQ(backend.device(), nn::Device::kCpu);
}

}  // namespace
}  // namespace lockstep::testing
