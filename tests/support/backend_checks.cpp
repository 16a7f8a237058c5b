#include "support/backend_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>

#include "support/gradient_check.h"

namespace lockstep::testing {

nn::Tensor random_tensor(const nn::Shape& shape, uint64_t seed, float lo, float hi) {
  nn::Tensor t(shape);
  fill_random(t, seed, lo, hi);
  return t;
}

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

bool bitwise_equal(const nn::Tensor& a, const nn::Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

size_t differing_bits(const std::vector<std::vector<float>>& a,
                      const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  size_t n = 0;
  for (size_t t = 0; t < a.size() && t < b.size(); ++t) {
    EXPECT_EQ(a[t].size(), b[t].size()) << "array " << t;
    for (size_t i = 0; i < a[t].size() && i < b[t].size(); ++i) {
      n += std::memcmp(&a[t][i], &b[t][i], sizeof(float)) != 0;
    }
  }
  return n;
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

// Built with a stream: GCC 12 at -O3 warns falsely (-Wrestrict) on
// "literal" + std::string chains.
std::string geometry_name(const nn::Conv2dGeometry& g) {
  std::ostringstream name;
  name << "n" << g.batch << "_c" << g.in_channels << "_" << g.in_h << "x" << g.in_w << "_out"
       << g.out_channels << "_k" << g.kernel_h << "x" << g.kernel_w << "_s" << g.stride << "_p"
       << g.pad;
  return name.str();
}

std::string geometry_name(const nn::Pool2dGeometry& g) {
  std::ostringstream name;
  name << "n" << g.batch << "_c" << g.channels << "_" << g.in_h << "x" << g.in_w << "_k" << g.kernel
       << "_s" << g.stride;
  return name.str();
}

}  // namespace lockstep::testing

namespace lockstep::nn {

void PrintTo(const Conv2dGeometry& g, std::ostream* os) {
  *os << testing::geometry_name(g);
}

void PrintTo(const Pool2dGeometry& g, std::ostream* os) {
  *os << testing::geometry_name(g);
}

}  // namespace lockstep::nn
