#include "nn/exact_sum.h"

#include <algorithm>
#include <cmath>

namespace lockstep::nn {
namespace {

constexpr int kBinBits = 32;

// The bin of |v| > 0: floor(log2 |v| / 32).
int64_t bin_of(double v) {
  const int e = std::ilogb(v);
  return e >= 0 ? e / kBinBits : -((-e + kBinBits - 1) / kBinBits);
}

template <typename T>
double max_abs(const T* x, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(x[i])));
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

// Digits at top T: with s = x * 2^-(32 (T - 1)) (exact: a power of two),
// hi = trunc(s / 2^32) and lo = trunc(s - hi * 2^32), both below 2^32.
template <typename T>
void BinnedSum::add_values(const T* x) {
  const double m = max_abs(x, n_);
  if (m == 0.0) return;
  raise_top(bin_of(m));
  const double to_lo = std::ldexp(1.0, -static_cast<int>(kBinBits * (top_ - 1)));
  const double to_hi = std::ldexp(1.0, -kBinBits);
  const double hi_unit = std::ldexp(1.0, kBinBits);
  int64_t* hi = bins_.data();
  int64_t* lo = hi + n_;
  for (int64_t i = 0; i < n_; ++i) {
    const double s = static_cast<double>(x[i]) * to_lo;
    const double h = std::trunc(s * to_hi);
    hi[i] += static_cast<int64_t>(h);
    lo[i] += static_cast<int64_t>(s - h * hi_unit);
  }
}

template <typename T>
void BinnedSum::write_result(double factor, T* out) const {
  if (top_ == kEmpty) {
    std::fill(out, out + n_, T(0));
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
