// Log-softmax and the classification losses on the CPU, row by row. Loss
// sums are accumulated in double, in row order, on the calling thread (the
// matrices are (batch, classes): small), so they do not depend on threads.
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "nn/cpu/kernels.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int64_t kElementGrain = int64_t{1} << 15;

int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, cols));
}

// log(sum(exp(x))) of one row, shifted by its maximum for stability.
float log_sum_exp(const float* x, int64_t cols) {
  const float top = *std::max_element(x, x + cols);
  if (std::isinf(top)) return top;  // +inf dominates; all -inf stays -inf
  float sum = 0.0f;
  for (int64_t j = 0; j < cols; ++j) sum += std::exp(x[j] - top);
  return top + std::log(sum);
}

// Index of the first maximum of a row.
int64_t argmax(const float* x, int64_t cols) {
  return std::max_element(x, x + cols) - x;
}

bool label_ok(int32_t label, int64_t cols) {
  return label >= 0 && label < cols;
}

// bad_labels null: a label outside [0, cols) is an InputError; otherwise
// *bad_labels counts such rows, which the callers then skip.
void check_labels(const char* op, int64_t rows, int64_t cols, const int32_t* labels,
                  int64_t* bad_labels) {
  for (int64_t i = 0; i < rows; ++i) {
    if (label_ok(labels[i], cols)) continue;
    if (bad_labels != nullptr) {
      ++*bad_labels;
      continue;
    }
    fail_input(op, ": label ", labels[i], " of row ", i, " is outside [0, ", cols,
               "); check that the data set's labels match the model's number of classes");
  }
}

}  // namespace

// x, y: (rows, cols); y = x - logsumexp(x) per row
void log_softmax_forward(ThreadPool& pool, int64_t rows, int64_t cols, const float* x, float* y) {
  if (cols <= 0) return;
  pool.parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; ++i) {
      const float lse = log_sum_exp(x + i * cols, cols);
      for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] - lse;
    }
  });
}

// y, dy, dx: (rows, cols); dx = dy - exp(y) * sum(dy) per row
void log_softmax_backward(ThreadPool& pool, int64_t rows, int64_t cols, const float* y,
                          const float* dy, float* dx) {
  pool.parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* yr = y + i * cols;
      const float* dyr = dy + i * cols;
      float total = 0.0f;
      for (int64_t j = 0; j < cols; ++j) total += dyr[j];
      for (int64_t j = 0; j < cols; ++j) dx[i * cols + j] = dyr[j] - std::exp(yr[j]) * total;
    }
  });
}

// logp, dlogp: (rows, cols); labels: (rows). loss_i = -logp[i, label_i];
// dlogp = -grad_scale at each label, 0 elsewhere. Rows with a label outside
// [0, cols): see check_labels.
LossStats nll_loss(ThreadPool& pool, int64_t rows, int64_t cols, const float* logp,
                   const int32_t* labels, float grad_scale, float* dlogp, int64_t* bad_labels) {
  int64_t bad = 0;
  check_labels("nll_loss", rows, cols, labels, bad_labels ? &bad : nullptr);
  if (bad_labels) *bad_labels = bad;
  LossStats stats;
  stats.count = rows - bad;
  for (int64_t i = 0; i < rows; ++i) {
    if (bad != 0 && !label_ok(labels[i], cols)) continue;
    const float* row = logp + i * cols;
    stats.loss_sum -= static_cast<double>(row[labels[i]]);
    stats.correct += argmax(row, cols) == labels[i] ? 1 : 0;
  }
  if (dlogp) {
    fill(pool, rows * cols, 0.0f, dlogp);
    for (int64_t i = 0; i < rows; ++i) {
      if (label_ok(labels[i], cols)) dlogp[i * cols + labels[i]] = -grad_scale;
    }
  }
  return stats;
}

// logits, dlogits: (rows, cols); labels: (rows). With e = label_smoothing,
// loss_i = logsumexp(x_i) - (1 - e) x[i, label_i] - e mean_j x[i, j];
// dlogits = grad_scale * (softmax(x) - (1 - e) onehot(label) - e / cols).
LossStats softmax_cross_entropy(ThreadPool& pool, int64_t rows, int64_t cols, const float* logits,
                                const int32_t* labels, float grad_scale, float* dlogits,
                                float label_smoothing, int64_t* bad_labels) {
  const float e = label_smoothing, uniform = e / static_cast<float>(cols);
  int64_t bad = 0;
  check_labels("softmax_cross_entropy", rows, cols, labels, bad_labels ? &bad : nullptr);
  if (bad_labels) *bad_labels = bad;
  LossStats stats;
  stats.count = rows - bad;
  for (int64_t i = 0; i < rows; ++i) {
    if (bad != 0 && !label_ok(labels[i], cols)) {
      if (dlogits) fill(pool, cols, 0.0f, dlogits + i * cols);
      continue;
    }
    const float* row = logits + i * cols;
    const float lse = log_sum_exp(row, cols);
    double target = static_cast<double>(row[labels[i]]);
    if (e != 0.0f) {
      double mean = 0.0;
      for (int64_t j = 0; j < cols; ++j) mean += row[j];
      target = (1.0 - e) * target + e * mean / static_cast<double>(cols);
    }
    stats.loss_sum += static_cast<double>(lse) - target;
    stats.correct += argmax(row, cols) == labels[i] ? 1 : 0;
    if (dlogits) {
      float* d = dlogits + i * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const float t = (j == labels[i] ? 1.0f - e : 0.0f) + uniform;
        d[j] = grad_scale * (std::exp(row[j] - lse) - t);
      }
    }
  }
  return stats;
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
