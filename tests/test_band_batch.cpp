// mnist_net learns the band batch on the CPU (tests/support/band_batch.h):
// the mean loss of its 30th step is under 40% of its first, with margin for
// the CUDA tests' bound (half the first) at 16 bits, which track fp32 within
// 5% of the first loss.
#include <gtest/gtest.h>

#include "support/band_batch.h"
#include "support/cpu_backend.h"

namespace lockstep::testing {
namespace {

TEST(BandBatch, MnistNetLearnsItInThirtySteps) {
  const auto backend = test_cpu_backend(1);
  const BandBatch b = band_batch();
  const std::vector<double> losses =
      band_batch_losses(*backend, nn::Device::kCpu, b.x, b.labels.data(), b.ids);
  ASSERT_EQ(losses.size(), 30u);
  EXPECT_NEAR(losses.front(), 2.3, 0.3);  // about ln 10 before any step
  EXPECT_LT(losses.back(), 0.4 * losses.front()) << losses.back() << " after " << losses.front();
}

}  // namespace
}  // namespace lockstep::testing
