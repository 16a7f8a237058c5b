#include "support/backend_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "support/gradient_check.h"

namespace lockstep::testing {

nn::Tensor random_tensor(const nn::Shape& shape, uint64_t seed, float lo, float hi) {
  nn::Tensor t(shape);
  fill_random(t, seed, lo, hi);
  return t;
}

bool bitwise_equal(const nn::Tensor& a, const nn::Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

void expect_close(const Reference& ref, const float* got, const char* what) {
  int failures = 0;
  for (size_t i = 0; i < ref.value.size() && failures < 5; ++i) {
    const double tol = 2e-5 * ref.magnitude[i] + 1e-6;
    if (!(std::abs(got[i] - ref.value[i]) <= tol)) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << ref.value[i];
      ++failures;
    }
  }
}

nn::DropoutGeometry dropout_geometry(int64_t n, int64_t c, int64_t s, float p, uint64_t stream) {
  nn::DropoutGeometry g;
  g.batch = n, g.channels = c, g.spatial = s, g.p = p, g.seed = 42, g.stream = stream;
  return g;
}

}  // namespace lockstep::testing
