#include "nn/exact_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <immintrin.h>

namespace lockstep::nn {
namespace {

constexpr int kBinBits = 32;

// The bin of |v| > 0: floor(log2 |v| / 32).
int64_t bin_of(double v) {
  const int e = std::ilogb(v);
  return e >= 0 ? e / kBinBits : -((-e + kBinBits - 1) / kBinBits);
}

// The largest magnitude of x[0..n); NaN when any element is NaN.
double max_abs(const double* x, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = std::max(m, std::fabs(x[i]));
  }
  return m;
}

double max_abs(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m8 = _mm256_setzero_ps(), nan8 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    m8 = _mm256_max_ps(m8, _mm256_andnot_ps(sign, v));
    nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  if (_mm256_movemask_ps(nan8) != 0) return std::nan("");
  float lanes[8];
  _mm256_storeu_ps(lanes, m8);
  double m = 0.0;
  for (float v : lanes) m = std::max(m, static_cast<double>(v));
  for (; i < n; ++i) {
    if (std::isnan(x[i])) return std::nan("");
    m = std::max(m, std::fabs(static_cast<double>(x[i])));
  }
  return m;
}

}  // namespace

BinnedSum::BinnedSum(int64_t n) : n_(n), bins_(static_cast<size_t>(2 * n), 0) {}

void BinnedSum::clear() {
  std::fill(bins_.begin(), bins_.end(), 0);
  top_ = kEmpty;
}

void BinnedSum::raise_top(int64_t top) {
  if (top <= top_) return;
  if (top == kNonFinite) {
    top_ = top;
    return;
  }
  int64_t* hi = bins_.data();
  int64_t* lo = hi + n_;
  if (top_ != kEmpty && top == top_ + 1) {
    std::copy(hi, hi + n_, lo);
    std::fill(hi, hi + n_, 0);
  } else {
    std::fill(bins_.begin(), bins_.end(), 0);
  }
  top_ = top;
}

void BinnedSum::add(const float* x) {
  add_values(x);
}
void BinnedSum::add(const double* x) {
  add_values(x);
}

// Digits at top T, with s = x * 2^-(32 (T - 1)) (exact: a power of two),
// |s| < 2^64: hi = trunc(s / 2^32), lo = trunc(s - hi * 2^32), truncated
// toward zero, |hi| < 2^32, |lo| < 2^32. Every step is exact but the two
// truncations, so hi * 2^32 + lo = trunc(s) depends on x and T only. After
// a raise by one bin the old hi is what the new lo would have been, and
// the new hi 0; after a raise by two or more both are 0 (|x| is below the
// new grid's unit): so raise_top is exact for any raise. (Rounding to
// nearest was not: a term rounded up to one unit at the new grid, but the
// sums it was added to before a raise by two were zeroed, and the sum
// depended on the order; ReproBLAS truncates too.) The integer-valued
// doubles become int64 with the 2^52 trick: (v + 1.5 * 2^52) holds v in its
// low mantissa bits for an integer |v| < 2^51.
namespace {

constexpr double kMagic = 0x1.8p52;

int64_t bits_of(double v) {
  int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

inline void add_digits(double s, double to_hi, double hi_unit, int64_t& hi, int64_t& lo) {
  static const int64_t magic_bits = bits_of(kMagic);
  const double h = std::trunc(s * to_hi);
  hi += bits_of(h + kMagic) - magic_bits;
  lo += bits_of(std::trunc(s - h * hi_unit) + kMagic) - magic_bits;
}

// Four floats at a time (AVX2, the build's baseline); the same digits.
int64_t add_digits_avx2(const float* x, int64_t n, double to_lo, double to_hi, double hi_unit,
                        int64_t* hi, int64_t* lo) {
  const __m256d magic = _mm256_set1_pd(kMagic), lo_scale = _mm256_set1_pd(to_lo);
  const __m256d hi_scale = _mm256_set1_pd(to_hi), unit = _mm256_set1_pd(hi_unit);
  const __m256i magic_bits = _mm256_castpd_si256(magic);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    constexpr int kToZero = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    const __m256d s = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), lo_scale);
    const __m256d h = _mm256_round_pd(_mm256_mul_pd(s, hi_scale), kToZero);
    const __m256d hm = _mm256_add_pd(h, magic);
    const __m256d lm =
        _mm256_add_pd(_mm256_round_pd(_mm256_sub_pd(s, _mm256_mul_pd(h, unit)), kToZero), magic);
    auto* hp = reinterpret_cast<__m256i*>(hi + i);
    auto* lp = reinterpret_cast<__m256i*>(lo + i);
    _mm256_storeu_si256(hp,
                        _mm256_add_epi64(_mm256_loadu_si256(hp),
                                         _mm256_sub_epi64(_mm256_castpd_si256(hm), magic_bits)));
    _mm256_storeu_si256(lp,
                        _mm256_add_epi64(_mm256_loadu_si256(lp),
                                         _mm256_sub_epi64(_mm256_castpd_si256(lm), magic_bits)));
  }
  return i;
}

}  // namespace

template <typename T>
void BinnedSum::add_values(const T* x) {
  const double m = max_abs(x, n_);
  if (m == 0.0 || top_ == kNonFinite) return;
  if (!std::isfinite(m)) {
    raise_top(kNonFinite);
    return;
  }
  raise_top(bin_of(m));
  const double to_lo = std::ldexp(1.0, -static_cast<int>(kBinBits * (top_ - 1)));
  const double to_hi = std::ldexp(1.0, -kBinBits);
  const double hi_unit = std::ldexp(1.0, kBinBits);
  int64_t* hi = bins_.data();
  int64_t* lo = hi + n_;
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) i = add_digits_avx2(x, n_, to_lo, to_hi, hi_unit, hi, lo);
  for (; i < n_; ++i) add_digits(static_cast<double>(x[i]) * to_lo, to_hi, hi_unit, hi[i], lo[i]);
}

template <typename T>
void BinnedSum::write_result(double factor, T* out) const {
  if (top_ == kEmpty || top_ == kNonFinite) {
    std::fill(out, out + n_, top_ == kEmpty ? T(0) : std::numeric_limits<T>::quiet_NaN());
    return;
  }
  const double lo_unit = std::ldexp(1.0, static_cast<int>(kBinBits * (top_ - 1)));
  const double hi_unit = std::ldexp(lo_unit, kBinBits);
  const int64_t* hi = bins_.data();
  const int64_t* lo = hi + n_;
  for (int64_t i = 0; i < n_; ++i) {
    const double sum = static_cast<double>(hi[i]) * hi_unit + static_cast<double>(lo[i]) * lo_unit;
    out[i] = static_cast<T>(sum * factor);
  }
}

void BinnedSum::result(double factor, float* out) const {
  write_result(factor, out);
}
void BinnedSum::result(double factor, double* out) const {
  write_result(factor, out);
}

}  // namespace lockstep::nn
