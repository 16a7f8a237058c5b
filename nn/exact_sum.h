// BinnedSum: sums of float or double arrays whose result does not depend on
// the order of the additions, nor on how the terms are split between
// partial sums (ranks, threads) that are merged later. It is the exact
// combination behind the reproducible mode (docs/reproducible.md).
//
// Each added value x is cut on a fixed grid of binary bins: bin j holds
// the digit of x at 2^(32 j). A sum keeps, per element, the integer sums of
// the digits of its two highest bins, `top` and `top - 1`, where top is the
// bin of the largest magnitude added to the whole array so far: x truncated
// to a multiple of 2^(32 (top - 1)) (toward zero), split in two digits. The
// kept part depends only on x and top, so integer sums of digits are exact
// and associative: adding in any order, in any groups, then raising every
// group to the largest top and adding their bins gives the same integers.
// Precision: every term keeps at least 32 bits below the array's largest
// magnitude (fp32 keeps 24).
//
// Shapes: an array of n elements; bins() is (2, n), row 0 the top bin's
// digit sums, row 1 the next's. At most 2^31 terms per element.
// Threads: not thread-safe; host memory only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::nn {

class BinnedSum {
 public:
  // Top of an array to which only zeros were added.
  static constexpr int64_t kEmpty = -(int64_t{1} << 40);
  // Top of an array to which an infinity or NaN was added: its result is NaN.
  static constexpr int64_t kNonFinite = int64_t{1} << 40;

  explicit BinnedSum(int64_t n = 0);

  int64_t size() const { return n_; }
  // Back to an empty sum.
  void clear();
  // Adds x[0..n) element-wise (one partial: a sample's gradient).
  void add(const float* x);
  void add(const double* x);
  // The bin of the largest magnitude added so far (kEmpty when none).
  int64_t top() const { return top_; }
  // Re-expresses the sum at a top >= top() (digits that fall below the two
  // kept bins are dropped, as they would have been had that top been seen).
  void raise_top(int64_t top);
  // (2, n) digit sums at top(): for an allreduce sum of equal-top sums.
  std::span<int64_t> bins() { return bins_; }
  // out[i] = factor * sum_i, rounded once to double, then to the type of out.
  void result(double factor, float* out) const;
  void result(double factor, double* out) const;

 private:
  template <typename T>
  void add_values(const T* x);
  template <typename T>
  void write_result(double factor, T* out) const;

  int64_t n_ = 0;
  int64_t top_ = kEmpty;
  std::vector<int64_t> bins_;  // (2, n)
};

}  // namespace lockstep::nn
