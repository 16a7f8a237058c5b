// BinnedSum (nn/exact_sum.h): the same bits whatever the order of the terms
// and however they are split into partial sums merged later, as ranks do.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "nn/exact_sum.h"

namespace lockstep {
namespace {

using nn::BinnedSum;

constexpr int64_t kN = 37;

// Terms of widely different magnitudes and signs: 2^-40 .. 2^40.
std::vector<std::vector<float>> make_terms(int count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-40, 40);
  std::vector<std::vector<float>> terms(count, std::vector<float>(kN));
  for (auto& t : terms) {
    for (float& v : t) v = std::ldexp(mant(gen), exp(gen));
  }
  return terms;
}

// Splits terms round-robin over `parts` sums (as ranks hold strided
// samples), then merges them as the allreduce does: raise to the largest
// top, add the bins.
std::vector<float> split_sum(const std::vector<std::vector<float>>& terms, int parts) {
  std::vector<BinnedSum> sums(parts, BinnedSum(kN));
  for (size_t i = 0; i < terms.size(); ++i) sums[i % parts].add(terms[i].data());
  int64_t top = BinnedSum::kEmpty;
  for (const auto& s : sums) top = std::max(top, s.top());
  BinnedSum total(kN);
  total.raise_top(top);
  for (auto& s : sums) {
    s.raise_top(top);
    for (size_t j = 0; j < s.bins().size(); ++j) total.bins()[j] += s.bins()[j];
  }
  std::vector<float> out(kN);
  total.result(1.0 / 3.0, out.data());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(BinnedSum, AnySplitAndOrderGivesTheSameBits) {
  auto terms = make_terms(48, 7);
  const std::vector<float> one = split_sum(terms, 1);
  for (int parts : {2, 3, 4, 6, 8, 16, 48}) {
    EXPECT_TRUE(same_bits(one, split_sum(terms, parts))) << parts << " parts";
  }
  std::shuffle(terms.begin(), terms.end(), std::mt19937(3));
  EXPECT_TRUE(same_bits(one, split_sum(terms, 1))) << "shuffled";
  EXPECT_TRUE(same_bits(one, split_sum(terms, 5))) << "shuffled, 5 parts";
}

// When an array's largest term jumps by two bins or more (2^33 and up), the
// digits kept before the jump are dropped: a term added after it must drop
// the same way. (Digits rounded to nearest counted 1.5 * 2^31 as one unit of
// 2^32 after such a jump and as nothing before it: 1 rank and 2 ranks
// disagreed.) Every order of these terms and every split gives the same bits.
TEST(BinnedSum, AJumpOfTwoBinsDropsTermsWhateverTheirOrder) {
  const float a = std::ldexp(1.5f, 31), b = std::ldexp(1.0f, 64), c = -b;
  std::vector<std::vector<float>> terms = {std::vector<float>(kN, b), std::vector<float>(kN, a),
                                           std::vector<float>(kN, c)};
  const std::vector<float> one = split_sum(terms, 1);  // b, a, c on one rank
  // Ranks take samples round-robin: [b, c] and [a] on two.
  EXPECT_TRUE(same_bits(one, split_sum({terms[0], terms[2], terms[1]}, 1))) << "b, c, a";
  EXPECT_TRUE(same_bits(one, split_sum({terms[1], terms[0], terms[2]}, 1))) << "a, b, c";
  EXPECT_TRUE(same_bits(one, split_sum({terms[0], terms[1], terms[2]}, 2))) << "2 parts";
  EXPECT_TRUE(same_bits(one, split_sum(terms, 3))) << "3 parts";
  // a is 2^-33 of the largest term: below the window, so the sum is 0.
  EXPECT_EQ(one[0], 0.0f);
  // The double path and a single element (no vector loop) agree.
  for (const auto& order : {std::vector<double>{b, a, c}, std::vector<double>{a, b, c}}) {
    BinnedSum s(1);
    for (double v : order) s.add(&v);
    double out = -1.0;
    s.result(1.0, &out);
    EXPECT_EQ(out, 0.0) << order[0];
  }
}

TEST(BinnedSum, IsAccurateToTheLargestTerm) {
  const auto terms = make_terms(64, 11);
  const std::vector<float> got = split_sum(terms, 4);
  for (int64_t i = 0; i < kN; ++i) {
    long double exact = 0, largest = 0;
    for (const auto& t : terms) {
      exact += t[i];
      largest = std::max(largest, std::fabs(static_cast<long double>(t[i])));
    }
    const double want = static_cast<double>(exact / 3);
    // Rounded to float once: within an fp32 ulp of the value plus 2^-32 of the largest term.
    EXPECT_NEAR(got[i], want, std::fabs(want) * 1.2e-7 + 64 * std::ldexp(largest, -32)) << i;
  }
}

TEST(BinnedSum, SumsOfDoublesAndZeros) {
  BinnedSum s(1);
  EXPECT_EQ(s.top(), BinnedSum::kEmpty);
  double zero = 0.0, out = -1.0;
  s.add(&zero);
  s.result(1.0, &out);
  EXPECT_EQ(out, 0.0);
  for (double v : {0.25, 1e6, -3.5, 1e-9}) s.add(&v);
  s.result(1.0, &out);
  EXPECT_NEAR(out, 1e6 - 3.25 + 1e-9, 1e-6);
  s.clear();
  s.result(1.0, &out);
  EXPECT_EQ(out, 0.0);
}

TEST(BinnedSum, NonFiniteTermsGiveNaN) {
  BinnedSum s(kN), other(kN);
  std::vector<float> terms(kN, 1.0f);
  s.add(terms.data());
  terms[kN - 1] = std::numeric_limits<float>::infinity();  // in the scalar tail
  s.add(terms.data());
  terms[kN - 1] = 1.0f;
  terms[3] = std::nanf("");  // in a vector lane
  other.add(terms.data());
  std::vector<float> out(kN);
  for (BinnedSum* sum : {&s, &other}) {
    EXPECT_EQ(sum->top(), BinnedSum::kNonFinite);
    sum->result(1.0, out.data());
    EXPECT_TRUE(std::isnan(out[0]));
  }
}

}  // namespace
}  // namespace lockstep
