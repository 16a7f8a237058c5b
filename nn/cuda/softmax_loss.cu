// The classification losses on CUDA (log-softmax itself is cuDNN's:
// cudnn_ops.cpp). Mirrors nn/cpu/softmax_loss.cpp:
//   - labels are copied to the host and checked first, with the CPU's
//     message (InputError), before anything is written;
//   - one thread per row computes that row's loss term and arg-max (the
//     first maximum, as std::max_element), and the gradient;
//   - the per-row values come back to the host, where loss_sum is summed in
//     double in row order, exactly as the CPU does.
#include <vector>

#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

// Index of the first maximum of a row (std::max_element's comparisons).
__device__ int64_t argmax(const float* x, int64_t cols) {
  int64_t best = 0;
  for (int64_t j = 1; j < cols; ++j) {
    if (x[best] < x[j]) best = j;
  }
  return best;
}

// log(sum(exp(x))) of one row, shifted by its maximum for stability.
__device__ float log_sum_exp(const float* x, int64_t cols) {
  const float top = x[argmax(x, cols)];
  if (isinf(top)) return top;  // +inf dominates; all -inf stays -inf
  float sum = 0.0f;
  for (int64_t j = 0; j < cols; ++j) sum += expf(x[j] - top);
  return top + logf(sum);
}

// logp: (rows, cols); labels: (rows) -> picked[i] = logp[i, label_i],
// top[i] = argmax of row i
__global__ void nll_rows_kernel(int64_t rows, int64_t cols, const float* logp,
                                const int32_t* labels, float* picked, int32_t* top) {
  CUDA_KERNEL_LOOP(i, rows) {
    const float* row = logp + i * cols;
    picked[i] = row[labels[i]];
    top[i] = static_cast<int32_t>(argmax(row, cols));
  }
}

// dlogp: (rows, cols) = -grad_scale at each label, 0 elsewhere
__global__ void nll_grad_kernel(int64_t rows, int64_t cols, const int32_t* labels, float grad_scale,
                                float* dlogp) {
  CUDA_KERNEL_LOOP(i, rows * cols) {
    dlogp[i] = i % cols == labels[i / cols] ? -grad_scale : 0.0f;
  }
}

// logits, dlogits: (rows, cols); labels: (rows) -> lse[i], picked[i] =
// (1 - e) logits[i, label_i] + e mean_j logits[i, j], top[i]; dlogits (may
// be null) = grad_scale * (softmax(x) - (1 - e) onehot(label) - e / cols)
__global__ void cross_entropy_rows_kernel(int64_t rows, int64_t cols, const float* logits,
                                          const int32_t* labels, float grad_scale, float e,
                                          float* lse, float* picked, int32_t* top, float* dlogits) {
  CUDA_KERNEL_LOOP(i, rows) {
    const float* row = logits + i * cols;
    const float l = log_sum_exp(row, cols);
    lse[i] = l;
    float mean = 0.0f;
    for (int64_t j = 0; e != 0.0f && j < cols; ++j) mean += row[j];
    picked[i] = (1.0f - e) * row[labels[i]] + e * mean / static_cast<float>(cols);
    top[i] = static_cast<int32_t>(argmax(row, cols));
    if (dlogits != nullptr) {
      float* d = dlogits + i * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const float target = (j == labels[i] ? 1.0f - e : 0.0f) + e / static_cast<float>(cols);
        d[j] = grad_scale * (expf(row[j] - l) - target);
      }
    }
  }
}

// The labels, copied to the host and checked as the CPU checks them.
std::vector<int32_t> checked_labels(DeviceContext& ctx, const char* op, int64_t rows, int64_t cols,
                                    const int32_t* labels) {
  std::vector<int32_t> host(static_cast<size_t>(rows));
  ctx.copy_to_host(host.data(), labels, host.size() * sizeof(int32_t));
  for (int64_t i = 0; i < rows; ++i) {
    if (host[i] < 0 || host[i] >= cols) {
      fail_input(op, ": label ", host[i], " of row ", i, " is outside [0, ", cols,
                 "); check that the data set's labels match the model's number of classes");
    }
  }
  return host;
}

template <typename T>
std::vector<T> to_host(DeviceContext& ctx, const T* device_values, int64_t count) {
  std::vector<T> host(static_cast<size_t>(count));
  ctx.copy_to_host(host.data(), device_values, host.size() * sizeof(T));
  return host;
}

}  // namespace

// logp, dlogp: (rows, cols); labels: (rows, device). loss_i = -logp[i, label_i]
LossStats nll_loss(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logp,
                   const int32_t* labels, float grad_scale, float* dlogp) {
  const std::vector<int32_t> host_labels = checked_labels(ctx, "nll_loss", rows, cols, labels);
  LossStats stats;
  stats.count = rows;
  if (rows == 0) return stats;
  float* picked = ctx.scratch(Scratch::kRowValues).reserve_for<float>(rows);
  int32_t* top = ctx.scratch(Scratch::kRowIndices).reserve_for<int32_t>(rows);
  launch(nll_rows_kernel, rows, ctx.stream(), rows, cols, logp, labels, picked, top);
  if (dlogp != nullptr) {
    launch(nll_grad_kernel, rows * cols, ctx.stream(), rows, cols, labels, grad_scale, dlogp);
  }
  const std::vector<float> host_picked = to_host(ctx, picked, rows);
  const std::vector<int32_t> host_top = to_host(ctx, top, rows);
  for (int64_t i = 0; i < rows; ++i) {
    stats.loss_sum -= static_cast<double>(host_picked[i]);
    stats.correct += host_top[i] == host_labels[i] ? 1 : 0;
  }
  return stats;
}

// logits, dlogits: (rows, cols); labels: (rows, device).
// loss_i = logsumexp(x_i) - picked_i (see cross_entropy_rows_kernel)
LossStats softmax_cross_entropy(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logits,
                                const int32_t* labels, float grad_scale, float* dlogits,
                                float label_smoothing) {
  const std::vector<int32_t> host_labels =
      checked_labels(ctx, "softmax_cross_entropy", rows, cols, labels);
  LossStats stats;
  stats.count = rows;
  if (rows == 0) return stats;
  float* lse = ctx.scratch(Scratch::kRowValues).reserve_for<float>(rows);
  float* picked = ctx.scratch(Scratch::kRowValues2).reserve_for<float>(rows);
  int32_t* top = ctx.scratch(Scratch::kRowIndices).reserve_for<int32_t>(rows);
  launch(cross_entropy_rows_kernel, rows, ctx.stream(), rows, cols, logits, labels, grad_scale,
         label_smoothing, lse, picked, top, dlogits);
  const std::vector<float> host_lse = to_host(ctx, lse, rows);
  const std::vector<float> host_picked = to_host(ctx, picked, rows);
  const std::vector<int32_t> host_top = to_host(ctx, top, rows);
  for (int64_t i = 0; i < rows; ++i) {
    stats.loss_sum += static_cast<double>(host_lse[i]) - static_cast<double>(host_picked[i]);
    stats.correct += host_top[i] == host_labels[i] ? 1 : 0;
  }
  return stats;
}

}  // namespace lockstep::nn::cuda
