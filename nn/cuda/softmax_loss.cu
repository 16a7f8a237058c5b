// The classification losses on CUDA (log-softmax itself is cuDNN's:
// cudnn_ops.cpp). Mirrors nn/cpu/softmax_loss.cpp:
//   - one thread per row computes that row's loss terms, arg-max (the first
//     maximum, as std::max_element) and gradient, and records its label;
//   - the per-row records come back to the host in one copy, with one host
//     wait per loss (so one per training step), through pinned memory;
//   - there the labels are checked, with the CPU's message (InputError),
//     and loss_sum is summed in double in row order, exactly as the CPU
//     does. A row whose label is out of range reads nothing out of range
//     and gets a zero gradient (the op then throws).
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

__device__ bool label_ok(int32_t label, int64_t cols) {
  return label >= 0 && label < cols;
}

// logp: (rows, cols); labels: (rows) -> out[i]
__global__ void nll_rows_kernel(int64_t rows, int64_t cols, const float* logp,
                                const int32_t* labels, RowResult* out) {
  CUDA_KERNEL_LOOP(i, rows) {
    const float* row = logp + i * cols;
    const int32_t label = labels[i];
    out[i] = {0.0f, label_ok(label, cols) ? row[label] : 0.0f,
              static_cast<int32_t>(argmax(row, cols)), label};
  }
}

// dlogp: (rows, cols) = -grad_scale at each label, 0 elsewhere
__global__ void nll_grad_kernel(int64_t rows, int64_t cols, const int32_t* labels, float grad_scale,
                                float* dlogp) {
  CUDA_KERNEL_LOOP(i, rows * cols) {
    dlogp[i] = i % cols == labels[i / cols] ? -grad_scale : 0.0f;
  }
}

// logits, dlogits: (rows, cols); labels: (rows) -> out[i]; dlogits (may be
// null) = grad_scale * (softmax(x) - (1 - e) onehot(label) - e / cols)
__global__ void cross_entropy_rows_kernel(int64_t rows, int64_t cols, const float* logits,
                                          const int32_t* labels, float grad_scale, float e,
                                          RowResult* out, float* dlogits) {
  CUDA_KERNEL_LOOP(i, rows) {
    const float* row = logits + i * cols;
    const int32_t label = labels[i];
    const bool ok = label_ok(label, cols);
    const float l = log_sum_exp(row, cols);
    float mean = 0.0f;
    for (int64_t j = 0; e != 0.0f && j < cols; ++j) mean += row[j];
    mean /= static_cast<float>(cols);
    out[i] = {l, ok ? (1.0f - e) * row[label] + e * mean : 0.0f,
              static_cast<int32_t>(argmax(row, cols)), label};
    if (dlogits != nullptr) {
      float* d = dlogits + i * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const float target = (j == label ? 1.0f - e : 0.0f) + e / static_cast<float>(cols);
        d[j] = ok ? grad_scale * (expf(row[j] - l) - target) : 0.0f;
      }
    }
  }
}

// The rows' records, on the host after one wait; labels checked as the CPU
// checks them. loss_i = sign * (lse_i - picked_i) summed in double.
LossStats collect(DeviceContext& ctx, const char* op, int64_t rows, int64_t cols,
                  const RowResult* device_rows) {
  const auto* host = static_cast<const RowResult*>(
      ctx.download(device_rows, static_cast<size_t>(rows) * sizeof(RowResult)));
  return collect_rows(op, rows, cols, host);
}

// rows' records -> *totals += their sums (one thread: row order, as the CPU)
__global__ void accumulate_rows_kernel(int64_t rows, int64_t cols, const RowResult* records,
                                       LossTotals* totals) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int64_t bad = 0;
  const LossStats s = sum_rows(rows, cols, records, &bad);
  add_batch_loss(s.loss_sum, s.correct, s.count, bad, *totals);
}

// The rows of nll_loss into `out`, and dlogp when not null.
void nll_rows(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logp,
              const int32_t* labels, float grad_scale, float* dlogp, RowResult* out) {
  launch(nll_rows_kernel, rows, ctx.stream(), rows, cols, logp, labels, out);
  if (dlogp != nullptr) {  // an out-of-range label matches no column: its row stays zero
    launch(nll_grad_kernel, rows * cols, ctx.stream(), rows, cols, labels, grad_scale, dlogp);
  }
}

void accumulate(DeviceContext& ctx, int64_t rows, int64_t cols, const RowResult* records,
                LossTotals* totals) {
  accumulate_rows_kernel<<<1, 1, 0, ctx.stream()>>>(rows, cols, records, totals);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// logp, dlogp: (rows, cols); labels: (rows, device). loss_i = -logp[i, label_i]
LossStats nll_loss(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logp,
                   const int32_t* labels, float grad_scale, float* dlogp) {
  if (rows == 0) return LossStats{};
  RowResult* out = ctx.scratch<RowResult>(Scratch::kRowResults, rows);
  nll_rows(ctx, rows, cols, logp, labels, grad_scale, dlogp, out);
  return collect(ctx, "nll_loss", rows, cols, out);
}

void nll_loss_accumulate(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logp,
                         const int32_t* labels, float grad_scale, float* dlogp,
                         LossTotals* totals) {
  RowResult* out = ctx.scratch<RowResult>(Scratch::kRowResults, std::max<int64_t>(rows, 1));
  nll_rows(ctx, rows, cols, logp, labels, grad_scale, dlogp, out);
  accumulate(ctx, rows, cols, out, totals);
}

// logits, dlogits: (rows, cols); labels: (rows, device).
// loss_i = logsumexp(x_i) - picked_i (see cross_entropy_rows_kernel)
LossStats softmax_cross_entropy(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logits,
                                const int32_t* labels, float grad_scale, float* dlogits,
                                float label_smoothing) {
  if (rows == 0) return LossStats{};
  RowResult* out = ctx.scratch<RowResult>(Scratch::kRowResults, rows);
  launch(cross_entropy_rows_kernel, rows, ctx.stream(), rows, cols, logits, labels, grad_scale,
         label_smoothing, out, dlogits);
  return collect(ctx, "softmax_cross_entropy", rows, cols, out);
}

void softmax_cross_entropy_accumulate(DeviceContext& ctx, int64_t rows, int64_t cols,
                                      const float* logits, const int32_t* labels, float grad_scale,
                                      float* dlogits, float label_smoothing, LossTotals* totals) {
  RowResult* out = ctx.scratch<RowResult>(Scratch::kRowResults, std::max<int64_t>(rows, 1));
  launch(cross_entropy_rows_kernel, rows, ctx.stream(), rows, cols, logits, labels, grad_scale,
         label_smoothing, out, dlogits);
  accumulate(ctx, rows, cols, out, totals);
}

}  // namespace lockstep::nn::cuda
