// Batch normalisation on CUDA, the same four passes as the CPU
// (nn/cpu/batchnorm.cpp): per-channel sums reduced in double (blocks over
// fixed chunks of a channel, then each channel's partial sums in order),
// then element-wise apply kernels with per-channel coefficients.
// batchnorm_stats / _backward_sums copy the sums to the host (where
// SyncBatchNorm can add them over ranks); the training ops keep them on the
// device and run the per-channel arithmetic (nn/batchnorm_math.h) in a
// kernel of one thread per channel: no host wait.
#include <algorithm>

#include "nn/batchnorm_math.h"
#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

constexpr int kReduceThreads = 256;

// Tree sum of two per-thread doubles across the block; thread 0 gets them.
__device__ void block_sum2(double& a, double& b) {
  __shared__ double sa[kReduceThreads], sb[kReduceThreads];
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sa[threadIdx.x] += sa[threadIdx.x + half];
      sb[threadIdx.x] += sb[threadIdx.x + half];
    }
    __syncthreads();
  }
  a = sa[0];
  b = sb[0];
}

// The per-channel reductions run on a (C, B) grid: block (c, b) sums
// elements [b * kChunk, (b + 1) * kChunk) of channel c's N * S, in double,
// into part; finish_sums_kernel then adds channel c's B partial sums in
// order. One block per channel left most of a GPU idle (16 to 64 blocks for
// resnet20: the two reductions took 55% of its step's kernel time on an
// H200). The chunk is fixed, not sized to the device, so the sums are the
// same bits on every GPU and every run.
constexpr int64_t kChunk = 4096;

int64_t chunks(const BatchNormGeometry& g) {
  return std::max<int64_t>(1, (g.batch * g.spatial + kChunk - 1) / kChunk);
}

// Block (c, b): term(at, s, q) adds element `at` of x's layout (N, C, S) to
// s and q; part[c * B + b] = s, part[C * B + c * B + b] = q.
template <typename Term>
__device__ void chunk_sums(int64_t N, int64_t C, int64_t S, Term term, double* part) {
  const int64_t c = blockIdx.x, b = blockIdx.y, B = gridDim.y;
  const int64_t end = min(N * S, (b + 1) * kChunk);
  double s = 0.0, q = 0.0;
  for (int64_t i = b * kChunk + threadIdx.x; i < end; i += kReduceThreads)
    term((i / S) * C * S + c * S + i % S, s, q);
  block_sum2(s, q);
  if (threadIdx.x == 0) part[c * B + b] = s, part[C * B + c * B + b] = q;
}

// x: (N, C, S); block (c, b) -> the partial sums of x and x^2
__global__ void stats_kernel(int64_t N, int64_t C, int64_t S, const float* x, double* part) {
  chunk_sums(
      N, C, S,
      [=](int64_t at, double& s, double& q) {
        const float v = x[at];
        s += v;
        q += static_cast<double>(v) * v;
      },
      part);
}

// block (c, b) -> the partial sums of g' and g' xhat
__global__ void grad_sums_kernel(int64_t N, int64_t C, int64_t S, const float* x, const float* y,
                                 const float* dy, const float* coef, double* part) {
  const int64_t c = blockIdx.x;
  const float mean = coef[c], invstd = coef[C + c];
  chunk_sums(
      N, C, S,
      [=](int64_t at, double& s, double& q) {
        const float g = y == nullptr || y[at] > 0.0f ? dy[at] : 0.0f;
        s += g;
        q += static_cast<double>(g) * (x[at] - mean) * invstd;
      },
      part);
}

// part (2, C, B) -> out (2, C): each channel's B partial sums, in order
__global__ void finish_sums_kernel(int64_t C, int64_t B, const double* part, double* out) {
  CUDA_KERNEL_LOOP(c, C) {
    double s = 0.0, q = 0.0;
    for (int64_t b = 0; b < B; ++b) s += part[c * B + b], q += part[C * B + c * B + b];
    out[c] = s;
    out[C + c] = q;
  }
}

// y = x * scale + shift (+ add when not null), then the ReLU
__global__ void apply_kernel(int64_t n, int64_t C, int64_t S, const float* x, const float* coef,
                             const float* add, bool relu, float* y) {
  CUDA_KERNEL_LOOP(i, n) {
    const int64_t c = (i / S) % C;
    float v = x[i] * coef[c] + coef[C + c];
    if (add != nullptr) v += add[i];
    y[i] = relu && v < 0.0f ? 0.0f : v;
  }
}

__global__ void backward_apply_kernel(int64_t n, int64_t C, int64_t S, const float* x,
                                      const float* y, const float* dy, const float* coef,
                                      float* dx) {
  CUDA_KERNEL_LOOP(i, n) {
    const int64_t c = (i / S) % C;
    const float g = y == nullptr || y[i] > 0.0f ? dy[i] : 0.0f;
    const float xhat = (x[i] - coef[c]) * coef[C + c];
    dx[i] = coef[2 * C + c] * (g - coef[3 * C + c] - xhat * coef[4 * C + c]);
  }
}

// sums (2, C) -> s.stats, the running statistics, s.coef (2, C), one thread
// per channel; thread 0 also counts the batch.
__global__ void train_forward_kernel(int64_t C, double count, const double* sums,
                                     BatchNormTrainState s) {
  CUDA_KERNEL_LOOP(c, C) {
    const BatchNormChannel ch = batchnorm_channel_forward(
        sums[c], sums[C + c], count, s.eps, s.momentum, s.weight[c], s.bias[c], s.running_mean[c],
        s.running_var[c], s.coef[c], s.coef[C + c]);
    s.stats[c] = ch.mean;
    s.stats[C + c] = ch.invstd;
    if (c == 0) s.num_batches_tracked[0] += 1.0f;
  }
}

// running statistics -> s.stats (mean, invstd), s.coef (scale, shift), one
// thread per channel
__global__ void eval_coef_kernel(int64_t C, BatchNormTrainState s) {
  CUDA_KERNEL_LOOP(c, C) {
    const BatchNormChannel ch =
        batchnorm_channel_eval(s.running_mean[c], s.running_var[c], s.eps, s.weight[c], s.bias[c],
                               s.coef[c], s.coef[C + c]);
    s.stats[c] = ch.mean;
    s.stats[C + c] = ch.invstd;
  }
}

// s.stats (2, C) doubles -> s.coef (2, C) floats: (mean, invstd)
__global__ void stats_to_coef_kernel(int64_t C, BatchNormTrainState s) {
  CUDA_KERNEL_LOOP(c, 2 * C) {
    s.coef[c] = static_cast<float>(s.stats[c]);
  }
}

// sums (2, C) -> dbias, dweight and (when apply) s.coef rows 2..4
__global__ void train_backward_kernel(int64_t C, double inv_count, const double* sums,
                                      BatchNormTrainState s, float* dweight, float* dbias,
                                      bool apply) {
  CUDA_KERNEL_LOOP(c, C) {
    dbias[c] = static_cast<float>(sums[c]);
    dweight[c] = static_cast<float>(sums[C + c]);
    if (apply) {
      batchnorm_channel_backward({s.stats[c], s.stats[C + c]}, s.weight[c], sums[c], sums[C + c],
                                 inv_count, s.coef[2 * C + c], s.coef[3 * C + c],
                                 s.coef[4 * C + c]);
    }
  }
}

// out (2, C) on the device -> first, second: host (C) each, in one download
// (one host wait).
void split_to_host(DeviceContext& ctx, const double* out, int64_t C, double* first,
                   double* second) {
  const auto* host =
      static_cast<const double*>(ctx.download(out, static_cast<size_t>(2 * C) * sizeof(double)));
  std::copy(host, host + C, first);
  std::copy(host + C, host + 2 * C, second);
}

// out (2, C) on the device <- a chunked reduction: kernel (stats_kernel or
// grad_sums_kernel) on the (C, chunks) grid with (N, C, S, args..., part),
// then each channel's partial sums in order.
template <typename Kernel, typename... Args>
void channel_sums(DeviceContext& ctx, const BatchNormGeometry& g, double* out, Kernel kernel,
                  Args... args) {
  const int64_t C = g.channels, B = chunks(g);
  double* part = ctx.scratch<double>(Scratch::kPartialSums, 2 * C * B);
  kernel<<<dim3(static_cast<unsigned>(C), static_cast<unsigned>(B)), kReduceThreads, 0,
           ctx.stream()>>>(g.batch, C, g.spatial, args..., part);
  CUDA_CHECK_LAUNCH();
  launch(finish_sums_kernel, C, ctx.stream(), C, B, part, out);
}

}  // namespace

// x: (N, C, S) -> sum, sumsq: host (C)
void batchnorm_stats(DeviceContext& ctx, const BatchNormGeometry& g, const float* x, double* sum,
                     double* sumsq) {
  const int64_t C = g.channels;
  double* out = ctx.scratch<double>(Scratch::kRowResults, 2 * C);
  channel_sums(ctx, g, out, stats_kernel, x);
  split_to_host(ctx, out, C, sum, sumsq);
}

void batchnorm_apply(DeviceContext& ctx, const BatchNormGeometry& g, const float* x,
                     const float* coef, const float* add, bool relu, float* y) {
  launch(apply_kernel, g.batch * g.channels * g.spatial, ctx.stream(),
         g.batch * g.channels * g.spatial, g.channels, g.spatial, x, coef, add, relu, y);
}

void batchnorm_backward_sums(DeviceContext& ctx, const BatchNormGeometry& g, const float* x,
                             const float* y, const float* dy, const float* coef, double* sum_dy,
                             double* sum_dy_xhat) {
  const int64_t C = g.channels;
  double* out = ctx.scratch<double>(Scratch::kRowResults, 2 * C);
  channel_sums(ctx, g, out, grad_sums_kernel, x, y, dy, coef);
  split_to_host(ctx, out, C, sum_dy, sum_dy_xhat);
}

void batchnorm_backward_apply(DeviceContext& ctx, const BatchNormGeometry& g, const float* x,
                              const float* y, const float* dy, const float* coef, float* dx) {
  launch(backward_apply_kernel, g.batch * g.channels * g.spatial, ctx.stream(),
         g.batch * g.channels * g.spatial, g.channels, g.spatial, x, y, dy, coef, dx);
}

void batchnorm_train_forward(DeviceContext& ctx, const BatchNormGeometry& g,
                             const BatchNormTrainState& s, const float* x, const float* add,
                             bool relu, float* y) {
  const int64_t C = g.channels;
  double* sums = ctx.scratch<double>(Scratch::kRowResults, 2 * C);
  channel_sums(ctx, g, sums, stats_kernel, x);
  launch(train_forward_kernel, C, ctx.stream(), C, static_cast<double>(g.batch * g.spatial), sums,
         s);
  if (y != nullptr) batchnorm_apply(ctx, g, x, s.coef, add, relu, y);
}

void batchnorm_train_backward(DeviceContext& ctx, const BatchNormGeometry& g,
                              const BatchNormTrainState& s, const float* x, const float* y,
                              const float* dy, float* dweight, float* dbias, float* dx) {
  const int64_t C = g.channels;
  launch(stats_to_coef_kernel, 2 * C, ctx.stream(), C, s);
  double* sums = ctx.scratch<double>(Scratch::kRowResults, 2 * C);
  channel_sums(ctx, g, sums, grad_sums_kernel, x, y, dy, s.coef);
  launch(train_backward_kernel, C, ctx.stream(), C, 1.0 / static_cast<double>(g.batch * g.spatial),
         sums, s, dweight, dbias, dx != nullptr);
  if (dx != nullptr) batchnorm_backward_apply(ctx, g, x, y, dy, s.coef, dx);
}

void batchnorm_eval_coef(DeviceContext& ctx, int64_t channels, const BatchNormTrainState& s) {
  launch(eval_coef_kernel, channels, ctx.stream(), channels, s);
}

}  // namespace lockstep::nn::cuda
