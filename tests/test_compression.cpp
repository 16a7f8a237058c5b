// 16-bit compression: the scalar conversions against the hardware's, and
// the span conversions and reduction step (vector and scalar paths) against
// the scalar conversions, bit for bit, on sizes that exercise both paths.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "distributed/compression.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace lockstep::distributed {
namespace {

TEST(Compression, ScalarConversionsRoundToNearestEven) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);   // ties to even: infinity
  EXPECT_EQ(float_to_fp16(-0x1p-24f), 0x8001);  // smallest subnormal
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);   // tie to even: zero
  EXPECT_EQ(fp16_to_float(0x0001), 0x1p-24f);
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::nanf("")))));
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.00390625f)), 1.0f);  // tie to even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

#if defined(__F16C__)
TEST(Compression, ScalarFp16MatchesTheHardwareConversion) {
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    // Exponents from 2^-30 to 2^17: subnormals, normals, overflow.
    const uint32_t bits = (state & 0x807fffffu) | ((97u + (state >> 8) % 48u) << 23);
    const float x = std::bit_cast<float>(bits);
    const uint16_t hw = static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x), 0), 0));
    ASSERT_EQ(float_to_fp16(x), hw) << x;
    ASSERT_EQ(std::bit_cast<uint32_t>(fp16_to_float(hw)),
              std::bit_cast<uint32_t>(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(hw)))));
  }
}
#endif

// Random floats over every range a gradient visits (subnormal in fp16,
// normal, past 65504), plus infinities and NaNs.
std::vector<float> awkward_floats(size_t n, uint32_t seed) {
  std::vector<float> out(n);
  uint32_t state = seed;
  for (size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    const uint32_t bits = (state & 0x807fffffu) | ((97u + (state >> 8) % 48u) << 23);
    out[i] = std::bit_cast<float>(bits);
    if (i % 97 == 5) out[i] = -INFINITY;
    if (i % 89 == 7) out[i] = std::nanf("");
  }
  return out;
}

uint16_t narrow(float x, Compression f) {
  return f == Compression::kFp16 ? float_to_fp16(x) : float_to_bf16(x);
}
float widen(uint16_t h, Compression f) {
  return f == Compression::kFp16 ? fp16_to_float(h) : bf16_to_float(h);
}

const size_t kSizes[] = {0, 1, 7, 16, 17, 33, 65537};

class SpanConversions : public ::testing::TestWithParam<Compression> {};

TEST_P(SpanConversions, MatchTheScalarConversionsBitForBit) {
  const Compression f = GetParam();
  for (size_t n : kSizes) {
    const std::vector<float> x = awkward_floats(n, 7 + static_cast<uint32_t>(n));
    const std::vector<float> y = awkward_floats(n, 99 + static_cast<uint32_t>(n));
    std::vector<uint16_t> hx(n), hy(n);
    const bool finite = to_16bit(x, hx, f);
    to_16bit(y, hy, f);
    bool expect_finite = true;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(hx[i], narrow(x[i], f)) << "to_16bit, n " << n << " element " << i << ": " << x[i];
      expect_finite &= std::isfinite(widen(hx[i], f));
    }
    EXPECT_EQ(finite, expect_finite) << "n " << n;
    std::vector<float> back(n);
    from_16bit(hx, back, f);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(widen(hx[i], f)))
          << "from_16bit, element " << i;
    }
    std::vector<uint16_t> sum = hy;
    add_16bit(hx, sum, f);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(sum[i], narrow(widen(hx[i], f) + widen(hy[i], f), f)) << "add_16bit " << i;
    }
    std::vector<uint16_t> third = hx;
    divide_16bit(third, 3.0f, f);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(third[i], narrow(widen(hx[i], f) / 3.0f, f)) << "divide_16bit " << i;
    }
  }
}

TEST_P(SpanConversions, OverflowIsReportedAndPropagates) {
  const Compression f = GetParam();
  const float big = f == Compression::kFp16 ? 40000.0f : 3e38f;
  std::vector<float> x(40, big);
  std::vector<uint16_t> h(40);
  ASSERT_TRUE(to_16bit(x, h, f));
  std::vector<uint16_t> sum = h;
  add_16bit(h, sum, f);  // 2 * big is past the format's largest value
  for (uint16_t v : sum) ASSERT_TRUE(std::isinf(widen(v, f)));
  x[39] = f == Compression::kFp16 ? 70000.0f : std::nanf("");
  EXPECT_FALSE(to_16bit(x, h, f));
}

std::string format_name(const ::testing::TestParamInfo<Compression>& param) {
  return to_string(param.param);
}

INSTANTIATE_TEST_SUITE_P(Formats, SpanConversions,
                         ::testing::Values(Compression::kFp16, Compression::kBf16), format_name);

TEST(Compression, SpanFunctionsRefuseNoneAndMismatchedSizes) {
  std::vector<float> x(3);
  std::vector<uint16_t> h(3), h2(2);
  EXPECT_THROW(to_16bit(x, h, Compression::kNone), Error);
  EXPECT_THROW(to_16bit(x, h2, Compression::kFp16), Error);
  EXPECT_THROW(add_16bit(h, h2, Compression::kBf16), Error);
}

}  // namespace
}  // namespace lockstep::distributed
