// The vector 16-bit conversions of each instruction set this CPU has
// (nn/cpu/convert16.h) against the scalar conversions of
// distributed/compression.h, bit for bit: every 16-bit value widened, and
// rounding edge cases (signed zeros, float and fp16 subnormals, ties to
// even, the largest finite values, infinities, quiet and signalling NaNs
// with payloads) plus a million random bit patterns narrowed, added and
// divided.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "distributed/compression.h"
#include "nn/cpu/convert16.h"
#include "nn/cpu_isa.h"

namespace lockstep::nn::cpu {
namespace {

using distributed::bf16_to_float;
using distributed::float_to_bf16;
using distributed::float_to_fp16;
using distributed::fp16_to_float;

uint16_t narrow(float x, bool fp16) {
  return fp16 ? float_to_fp16(x) : float_to_bf16(x);
}
float widen(uint16_t h, bool fp16) {
  return fp16 ? fp16_to_float(h) : bf16_to_float(h);
}
uint32_t bits(float x) {
  return std::bit_cast<uint32_t>(x);
}

// Float bit patterns at the edges of both formats' rounding.
const uint32_t kEdgeFloats[] = {
    0x00000000, 0x80000000,                          // +0, -0
    0x00000001, 0x807fffff, 0x00400000, 0x00008000,  // float subnormals
    0x00800000, 0x7f7fffff, 0xff7f7fff, 0x7f7f8000,  // smallest normal, largest finite
    0x7f800000, 0xff800000,                          // infinities
    0x7fc00000, 0xffc00000, 0x7fffffff, 0x7fc00001,  // quiet NaNs, payloads high and low
    0x7f800001, 0xff800100, 0x7fa00000, 0x7fbfffff,  // signalling NaNs
    0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,  // bf16: ties to even, either side
    0x3f801000, 0x3f803000, 0x3f800fff, 0x3f801001,  // fp16: ties to even, either side
    0x477fe000, 0x477fefff, 0x477ff000, 0x477fffff,  // fp16: 65504, to 65520 (infinity)
    0x33800000, 0x33000000, 0x33000001, 0x33c00000,  // fp16: 2^-24, 2^-25 (tie), 3 * 2^-25
    0x387fc000, 0x387fe000, 0x38800000, 0x387ff000,  // fp16: subnormal to normal
    0xc7800000, 0xb3000000, 0x3effffff, 0x40490fdb,  // -65536, -2^-25, below 0.5, pi
};

std::vector<float> test_floats() {
  std::vector<float> out;
  for (uint32_t b : kEdgeFloats) out.push_back(std::bit_cast<float>(b));
  uint32_t state = 2024;
  while (out.size() < (size_t{1} << 20) + 13) {  // a tail after the whole registers
    state = state * 1664525u + 1013904223u;
    out.push_back(std::bit_cast<float>(state));
  }
  return out;
}

// The 16-bit values of a float list, by the scalar conversion.
std::vector<uint16_t> scalar_narrow(const std::vector<float>& x, bool fp16) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = narrow(x[i], fp16);
  return out;
}

struct Case {
  CpuIsa isa;
  bool fp16;
};

class CpuConvert16 : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam().isa) > static_cast<int>(detect_cpu_isa())) {
      GTEST_SKIP() << "this CPU has no " << to_string(GetParam().isa)
                   << ": its kernels cannot run here";
    }
  }
  const Convert16Kernels& kernels() const { return convert16_kernels(GetParam().isa); }
  bool fp16() const { return GetParam().fp16; }
  // The elements a kernel must cover: every whole register of n.
  static int64_t head(int64_t n, int64_t converted) {
    EXPECT_GT(converted, n - 16) << "the kernel left more than one register to the scalar code";
    EXPECT_LE(converted, n);
    return converted;
  }
};

TEST_P(CpuConvert16, WidensEverySixteenBitValueExactly) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> out(all.size());
  const int64_t n = head(65536, kernels().widen(all.data(), out.data(), 65536, fp16()));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(bits(out[i]), bits(widen(all[i], fp16()))) << "16-bit value 0x" << std::hex << i;
  }
}

TEST_P(CpuConvert16, NarrowsLikeTheScalarConversion) {
  const std::vector<float> x = test_floats();
  const std::vector<uint16_t> want = scalar_narrow(x, fp16());
  std::vector<uint16_t> got(x.size());
  const int64_t count = static_cast<int64_t>(x.size());
  const int64_t n = head(count, kernels().narrow(x.data(), got.data(), count, fp16()));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], want[i]) << "float 0x" << std::hex << bits(x[i]);
  }
}

// Equal bits, or both NaN: which of two NaN operands an addition returns
// depends on the order the compiler gives them to the instruction.
bool same_or_both_nan(uint16_t got, uint16_t want, bool fp16) {
  return got == want || (std::isnan(widen(got, fp16)) && std::isnan(widen(want, fp16)));
}

TEST_P(CpuConvert16, AddsAndDividesLikeTheScalarConversions) {
  const std::vector<float> x = test_floats();
  std::vector<uint16_t> a = scalar_narrow(x, fp16());
  std::vector<uint16_t> b(a.rbegin(), a.rend());  // every value meets another
  const int64_t count = static_cast<int64_t>(a.size());
  std::vector<uint16_t> sum = b, third = a;
  const int64_t n = head(count, kernels().add(a.data(), sum.data(), count, fp16()));
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t want = narrow(widen(a[i], fp16()) + widen(b[i], fp16()), fp16());
    ASSERT_TRUE(same_or_both_nan(sum[i], want, fp16()))
        << std::hex << "0x" << a[i] << " + 0x" << b[i] << ": 0x" << sum[i] << ", want 0x" << want;
  }
  const int64_t m = head(count, kernels().divide(third.data(), count, 3.0f, fp16()));
  for (int64_t i = 0; i < m; ++i) {
    const uint16_t want = narrow(widen(a[i], fp16()) / 3.0f, fp16());
    ASSERT_TRUE(same_or_both_nan(third[i], want, fp16()))
        << std::hex << "0x" << a[i] << " / 3: 0x" << third[i] << ", want 0x" << want;
  }
}

INSTANTIATE_TEST_SUITE_P(IsasAndFormats, CpuConvert16,
                         ::testing::Values(Case{CpuIsa::kAvx2, true}, Case{CpuIsa::kAvx2, false},
                                           Case{CpuIsa::kAvx512, true},
                                           Case{CpuIsa::kAvx512, false}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return to_string(p.param.isa) + (p.param.fp16 ? "_fp16" : "_bf16");
                         });

}  // namespace
}  // namespace lockstep::nn::cpu
