// Batch normalisation on the CPU, parallel over channels. Each pass reads its
// inputs once: the statistics pass sums x and x^2 together, the apply pass
// fuses the ReLU, the backward sums pass sums g' and g' * x together.
// The sums of one channel run over its planes (one per sample) in 4 x 16
// float lanes, four independent chains (one chain was latency bound: the
// reductions took 2.5x the time of the apply pass that reads and writes as
// much), a plane's tail in a masked vector; every 4096 or more elements, at
// the end of a plane, the lanes are added into double. The order depends on
// the plane size alone, not on the thread count.
// The ops walk memory in its order: parallel over blocks of channels, each
// block sample by sample (plane n of every channel of the block, then plane
// n + 1), so a pass streams through contiguous blocks. They walked one
// channel at a time before, meaning to find its planes in cache for the
// second pass; but in training the tensors are far from every cache, and
// a channel's planes lie a power of two apart (64 KiB in resnet20's first
// stage), so they share a few of L2's sets and did not stay there:
// BatchNorm took 19% of a resnet20 step that way, 14% now (AVX2, 1
// thread, Zen 4; the step 6-10% faster). Each channel still sums its planes
// in sample order: the same bits. The training ops: the block's sums, its
// coefficients, then its planes applied (the bits of the separate ops).
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "nn/batchnorm_math.h"
#include "nn/cpu/kernels.h"
#include "nn/cpu/simd.h"
#include "nn/cpu/simd_native.h"
#include "nn/cpu/winograd_blocking.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// sum(a) and sum(a * b) of one channel, plane by plane: 16 lanes x 4
// chains. The avx2 build runs each plane twice, lanes 0-7 then 8-15, with
// 8 accumulators in registers (all 16 of a single pass spilled to the stack
// and ran 2.5x slower than the avx512 build); every lane sees the same
// additions in both builds.
class ChannelSums {
 public:
  // load(i, n) returns the native vectors (a, b) of elements [i, i + n) of
  // the plane, n <= kNativeLanes, zeros past n. Inlined: each caller's loads
  // fused in.
  template <typename Load>
  [[gnu::always_inline]] void add_plane(int64_t n, Load load) {
    for (int h = 0; h < kHalves; ++h) {
      const int64_t at = h * kNativeLanes;  // this pass's lanes of each 16
      vn s[kChains], q[kChains];
      for (int c = 0; c < kChains; ++c) s[c] = s_[h][c], q[c] = q_[h][c];
      const auto add = [&](int c, int64_t i, int64_t m) {
        const std::pair<vn, vn> ab = load(i, m);
        s[c] += ab.first;
        q[c] += ab.first * ab.second;
      };
      int64_t i = 0;
      for (; i + kChains * kLanes <= n; i += kChains * kLanes) {
        for (int c = 0; c < kChains; ++c) add(c, i + c * kLanes + at, kNativeLanes);
      }
      int c = 0;
      for (; i + kLanes <= n; i += kLanes) add(c++, i + at, kNativeLanes);
      if (i < n) add(c, i + at, std::clamp<int64_t>(n - i - at, 0, kNativeLanes));
      for (int k = 0; k < kChains; ++k) s_[h][k] = s[k], q_[h][k] = q[k];
    }
    pending_ += n;
    if (pending_ >= kFlushElements) flush();
  }

  // The sums so far, in double.
  void result(double& sum_a, double& sum_ab) {
    flush();
    sum_a = sum_a_;
    sum_ab = sum_ab_;
  }

 private:
  static constexpr int kChains = 4;
  static constexpr int kHalves = kLanes / kNativeLanes;
  static constexpr int64_t kFlushElements = 4096;

  void flush() {
    for (int h = 0; h < kHalves; ++h) {
      const vn s = (s_[h][0] + s_[h][1]) + (s_[h][2] + s_[h][3]);
      const vn q = (q_[h][0] + q_[h][1]) + (q_[h][2] + q_[h][3]);
      for (int l = 0; l < kNativeLanes; ++l) sum_a_ += s[l], sum_ab_ += q[l];
      for (int c = 0; c < kChains; ++c) s_[h][c] = q_[h][c] = vn{};
    }
    pending_ = 0;
  }

  vn s_[kHalves][kChains] = {}, q_[kHalves][kChains] = {};
  int64_t pending_ = 0;
  double sum_a_ = 0.0, sum_ab_ = 0.0;
};

void plane_apply(const float* x, float scale, float shift, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}

void plane_apply_relu(const float* x, float scale, float shift, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * scale + shift;
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

// y = x * scale + shift + add, then max(., 0) when relu: the bits of
// plane_apply, then the add of add.cpp.
void plane_apply_add(const float* x, float scale, float shift, const float* add, int64_t n,
                     float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * scale + shift;
    y[i] = v + add[i];
  }
}

void plane_apply_add_relu(const float* x, float scale, float shift, const float* add, int64_t n,
                          float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * scale + shift;
    const float s = v + add[i];
    y[i] = s < 0.0f ? 0.0f : s;
  }
}

// A plane written past the caches (write_plane): computed this many
// floats at a time into a buffer in L1 by the same code as otherwise (the
// same bits), then copied out with non-temporal stores.
constexpr int64_t kStreamChunk = 1024;

// dst[0, m) <- src[0, m), whole aligned vectors past the caches.
void stream_copy(const float* src, int64_t m, float* dst) {
  int64_t j = 0;
  for (; j < m && reinterpret_cast<uintptr_t>(dst + j) % sizeof(vn) != 0; ++j) dst[j] = src[j];
  for (; j + kNativeLanes <= m; j += kNativeLanes) streamn(dst + j, loadn(src + j));
  for (; j < m; ++j) dst[j] = src[j];
}

// write(i, m, out) writes elements [i, i + m) of a plane of n to out;
// with `stream`, through an L1 buffer and past the caches.
template <typename Write>
[[gnu::always_inline]] inline void write_plane(int64_t n, float* y, bool stream, Write&& write) {
  if (!stream) {
    write(int64_t{0}, n, y);
    return;
  }
  alignas(64) float buffer[kStreamChunk];
  for (int64_t i = 0; i < n; i += kStreamChunk) {
    const int64_t m = std::min(kStreamChunk, n - i);
    write(i, m, buffer);
    stream_copy(buffer, m, y + i);
  }
}

// Outputs of a pass at least this large go past the caches: the next op
// (a convolution) reads them after the caches have lost them anyway, and
// a plain store reads each line from memory before writing it. The
// threshold is the Winograd outputs' (winograd_blocking.h). Side by side
// (AMD EPYC Zen 4, 2026-11-30, lockstep bench resnet20 bf16, 6 pairs):
// median ratio 1.034 on 1 thread, 1.045 on 2; the same bits.
bool stream_output(const BatchNormGeometry& g) {
  return g.batch * g.channels * g.spatial * static_cast<int64_t>(sizeof(float)) >=
         winograd_stream_bytes();
}

// One plane of y from x, (scale, shift) and add (null: none).
void plane_apply_any(const float* x, float scale, float shift, const float* add, bool relu,
                     int64_t n, float* y) {
  if (add != nullptr) {
    if (relu) return plane_apply_add_relu(x, scale, shift, add, n, y);
    return plane_apply_add(x, scale, shift, add, n, y);
  }
  if (relu) return plane_apply_relu(x, scale, shift, n, y);
  plane_apply(x, scale, shift, n, y);
}

// Where the forward pass fused a ReLU, g' = dy where its output y was
// positive. The mask comes from y, or is recomputed from x with the
// forward's (scale, shift): x * scale + shift is the expression y was
// clamped from (plane_apply_relu, an FMA in both), and it is positive
// exactly where y is (NaN and -0.0 included), so the same mask with one
// tensor fewer to read.
struct ReluMask {
  const float* y = nullptr;  // mask from y (null and !from_x: no ReLU)
  bool from_x = false;
  float scale = 0.0f, shift = 0.0f;
  bool any() const { return y != nullptr || from_x; }
};

// dx = k * (g' - a - (x - mean) * invstd * b) = g' * k + x * u + w
// (y: the mask's plane when it comes from y)
void plane_backward(const float* x, const ReluMask& mask, const float* y, const float* dy, float k,
                    float u, float w, int64_t n, float* dx) {
  if (!mask.any()) {
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * k + x[i] * u + w;
    return;
  }
  if (mask.from_x) {
    const float scale = mask.scale, shift = mask.shift;
    for (int64_t i = 0; i < n; ++i) {
      const float d = dy[i];
      const float g = x[i] * scale + shift > 0.0f ? d : 0.0f;
      dx[i] = g * k + x[i] * u + w;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float d = dy[i];
    const float g = y[i] > 0.0f ? d : 0.0f;
    dx[i] = g * k + x[i] * u + w;
  }
}

// Adds plane xp (S floats) to the sum and sum of squares.
void add_stats_plane(ChannelSums& sums, const float* xp, int64_t S) {
  sums.add_plane(S, [=](int64_t i, int64_t m) {
    const vn v = loadn_part(xp + i, m);
    return std::pair{v, v};
  });
}

// Adds one plane to sum g' and sum g' * x: x, dy and (mask from y) y at
// offset `at`.
void add_grad_plane(ChannelSums& sums, const float* x, const ReluMask& mask, const float* dy,
                    int64_t at, int64_t S) {
  const float *xp = x + at, *dp = dy + at;
  if (mask.from_x) {
    const vn scale = vn{} + mask.scale, shift = vn{} + mask.shift;
    sums.add_plane(S, [=](int64_t i, int64_t m) {
      const vn v = loadn_part(xp + i, m);
      const vn masked = v * scale + shift > 0.0f ? loadn_part(dp + i, m) : vn{};
      return std::pair{masked, v};
    });
  } else if (mask.y != nullptr) {
    const float* yp = mask.y + at;  // g' = dy * (y > 0), a fused ReLU
    sums.add_plane(S, [=](int64_t i, int64_t m) {
      const vn masked = loadn_part(yp + i, m) > 0.0f ? loadn_part(dp + i, m) : vn{};
      return std::pair{masked, loadn_part(xp + i, m)};
    });
  } else {
    sums.add_plane(S, [=](int64_t i, int64_t m) {
      return std::pair{loadn_part(dp + i, m), loadn_part(xp + i, m)};
    });
  }
}

// sum g' and sum g' xhat of channel c from its sums; coef: (2, C)
void grad_result(ChannelSums& sums, const float* coef, int64_t C, int64_t c, double& sum_dy,
                 double& sum_dy_xhat) {
  double sg = 0.0, sgx = 0.0;
  sums.result(sg, sgx);
  sum_dy = sg;
  // sum g' (x - mean) invstd
  sum_dy_xhat = (sgx - static_cast<double>(coef[c]) * sg) * coef[C + c];
}

// Calls f(at, c) for plane (n, c) of channels [c0, c1), at = its offset,
// sample by sample.
template <typename F>
[[gnu::always_inline]] inline void for_each_plane(const BatchNormGeometry& g, int64_t c0,
                                                  int64_t c1, F&& f) {
  const int64_t S = g.spatial, CS = g.channels * S;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t c = c0; c < c1; ++c) f(n * CS + c * S, c);
  }
}

// The sums and sums of squares of channels [c0, c1) of x (N, C, S), one
// ChannelSums each.
std::vector<ChannelSums> block_stats(const BatchNormGeometry& g, const float* x, int64_t c0,
                                     int64_t c1) {
  std::vector<ChannelSums> sums(static_cast<size_t>(c1 - c0));
  for_each_plane(g, c0, c1, [&](int64_t at, int64_t c) {
    add_stats_plane(sums[static_cast<size_t>(c - c0)], x + at, g.spatial);
  });
  return sums;
}

// The blocks of channels the ops run in parallel: one per thread, so that
// each sample's block is one contiguous run (the work is even: no smaller
// chunks for balance). Measured: 2 threads over 2 blocks of resnet20's
// channels ran 2% faster than over 8 (AVX-512, Zen 4).
int64_t channel_grain(const ThreadPool& pool, const BatchNormGeometry& g) {
  return std::max<int64_t>(1, g.channels / pool.threads());
}

// One plane of channel c: dx from x, the mask (y: its plane when it comes
// from y), dy and coef (5, C).
void plane_backward_apply(const float* x, const ReluMask& mask, const float* y, const float* dy,
                          const float* coef, int64_t C, int64_t c, int64_t S, float* dx) {
  const float mean = coef[c], invstd = coef[C + c], k = coef[2 * C + c];
  const float a = coef[3 * C + c], b = coef[4 * C + c];
  const float u = -k * invstd * b;  // coefficient of x
  const float w = -k * a - u * mean;
  plane_backward(x, mask, y, dy, k, u, w, S, dx);
}

}  // namespace

// x: (N, C, S) -> sum, sumsq: host (C)
void batchnorm_stats(ThreadPool& pool, const BatchNormGeometry& g, const float* x, double* sum,
                     double* sumsq) {
  pool.parallel_for(g.channels, channel_grain(pool, g), [=](int64_t c0, int64_t c1, int) {
    std::vector<ChannelSums> sums = block_stats(g, x, c0, c1);
    for (int64_t c = c0; c < c1; ++c) sums[static_cast<size_t>(c - c0)].result(sum[c], sumsq[c]);
  });
}

// x, add, y: (N, C, S); coef: (2, C); add may be null
void batchnorm_apply(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                     const float* coef, const float* add, bool relu, float* y) {
  const int64_t S = g.spatial, C = g.channels;
  pool.parallel_for(g.batch * C, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, S)),
                    [=](int64_t i0, int64_t i1, int) {
                      for (int64_t i = i0; i < i1; ++i) {
                        const int64_t c = i % C;
                        plane_apply_any(x + i * S, coef[c], coef[C + c],
                                        add == nullptr ? nullptr : add + i * S, relu, S, y + i * S);
                      }
                    });
}

// x, add, y: (N, C, S); add may be null
void batchnorm_train_forward(ThreadPool& pool, const BatchNormGeometry& g,
                             const BatchNormTrainState& s, const float* x, const float* add,
                             bool relu, float* y) {
  const int64_t S = g.spatial, C = g.channels;
  const auto count = static_cast<double>(g.batch * S);
  pool.parallel_for(C, channel_grain(pool, g), [=](int64_t c0, int64_t c1, int) {
    std::vector<ChannelSums> sums = block_stats(g, x, c0, c1);
    for (int64_t c = c0; c < c1; ++c) {
      double sum = 0.0, sumsq = 0.0;
      sums[static_cast<size_t>(c - c0)].result(sum, sumsq);
      const BatchNormChannel ch =
          batchnorm_channel_forward(sum, sumsq, count, s.eps, s.momentum, s.weight[c], s.bias[c],
                                    s.running_mean[c], s.running_var[c], s.coef[c], s.coef[C + c]);
      s.stats[c] = ch.mean;
      s.stats[C + c] = ch.invstd;
    }
    if (y == nullptr) return;  // the apply taken into the next convolution
    const bool stream = stream_output(g);
    for_each_plane(g, c0, c1, [&](int64_t at, int64_t c) {
      write_plane(S, y + at, stream, [&](int64_t i, int64_t m, float* out) {
        plane_apply_any(x + at + i, s.coef[c], s.coef[C + c],
                        add == nullptr ? nullptr : add + at + i, relu, m, out);
      });
    });
    if (stream) stream_fence();
  });
  s.num_batches_tracked[0] += 1.0f;
}

// x, y, dy: (N, C, S); coef: (2, C) -> sum_dy, sum_dy_xhat: host (C)
void batchnorm_backward_sums(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                             const float* y, const float* dy, const float* coef, double* sum_dy,
                             double* sum_dy_xhat) {
  pool.parallel_for(g.channels, channel_grain(pool, g), [=](int64_t c0, int64_t c1, int) {
    std::vector<ChannelSums> sums(static_cast<size_t>(c1 - c0));
    const ReluMask mask{.y = y};
    for_each_plane(g, c0, c1, [&](int64_t at, int64_t c) {
      add_grad_plane(sums[static_cast<size_t>(c - c0)], x, mask, dy, at, g.spatial);
    });
    for (int64_t c = c0; c < c1; ++c) {
      grad_result(sums[static_cast<size_t>(c - c0)], coef, g.channels, c, sum_dy[c],
                  sum_dy_xhat[c]);
    }
  });
}

// x, y, dy, dx: (N, C, S); coef: (5, C)
void batchnorm_backward_apply(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                              const float* y, const float* dy, const float* coef, float* dx) {
  const int64_t S = g.spatial, C = g.channels;
  pool.parallel_for(g.batch * C, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, S)),
                    [=](int64_t i0, int64_t i1, int) {
                      const ReluMask mask{.y = y};
                      for (int64_t i = i0; i < i1; ++i) {
                        plane_backward_apply(x + i * S, mask, y == nullptr ? nullptr : y + i * S,
                                             dy + i * S, coef, C, i % C, S, dx + i * S);
                      }
                    });
}

// x, y, dy, dx: (N, C, S); dweight, dbias: (C). With s.mask_from_x the mask
// of y is recomputed from x (ReluMask), with the forward's (scale, shift)
// from s.stats, weight and bias, which the optimizer has not moved yet; y
// is not read then (null where the forward did not write it).
void batchnorm_train_backward(ThreadPool& pool, const BatchNormGeometry& g,
                              const BatchNormTrainState& s, const float* x, const float* y,
                              const float* dy, float* dweight, float* dbias, float* dx) {
  const int64_t S = g.spatial, C = g.channels;
  const double inv_count = 1.0 / static_cast<double>(g.batch * S);
  pool.parallel_for(C, channel_grain(pool, g), [=](int64_t c0, int64_t c1, int) {
    const auto block = static_cast<size_t>(c1 - c0);
    std::vector<ChannelSums> sums(block);
    std::vector<ReluMask> masks(block, ReluMask{.y = y});
    for (int64_t c = c0; c < c1; ++c) {
      ReluMask& mask = masks[static_cast<size_t>(c - c0)];
      if (s.mask_from_x) {  // y may be null then: not written (conv2d_maps_input)
        mask = ReluMask{.from_x = true};
        batchnorm_channel_coef(BatchNormChannel{s.stats[c], s.stats[C + c]}, s.weight[c], s.bias[c],
                               mask.scale, mask.shift);
      }
      s.coef[c] = static_cast<float>(s.stats[c]);
      s.coef[C + c] = static_cast<float>(s.stats[C + c]);
    }
    for_each_plane(g, c0, c1, [&](int64_t at, int64_t c) {
      const auto i = static_cast<size_t>(c - c0);
      add_grad_plane(sums[i], x, masks[i], dy, at, S);
    });
    for (int64_t c = c0; c < c1; ++c) {
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      grad_result(sums[static_cast<size_t>(c - c0)], s.coef, C, c, sum_dy, sum_dy_xhat);
      dbias[c] = static_cast<float>(sum_dy);
      dweight[c] = static_cast<float>(sum_dy_xhat);
      batchnorm_channel_backward(BatchNormChannel{s.stats[c], s.stats[C + c]}, s.weight[c], sum_dy,
                                 sum_dy_xhat, inv_count, s.coef[2 * C + c], s.coef[3 * C + c],
                                 s.coef[4 * C + c]);
    }
    if (dx == nullptr) return;
    const bool stream = stream_output(g);
    for_each_plane(g, c0, c1, [&](int64_t at, int64_t c) {
      write_plane(S, dx + at, stream, [&](int64_t i, int64_t m, float* out) {
        plane_backward_apply(x + at + i, masks[static_cast<size_t>(c - c0)],
                             y == nullptr ? nullptr : y + at + i, dy + at + i, s.coef, C, c, m,
                             out);
      });
    });
    if (stream) stream_fence();
  });
}

// running statistics -> s.stats (mean, invstd), s.coef (scale, shift)
void batchnorm_eval_coef(int64_t channels, const BatchNormTrainState& s) {
  for (int64_t c = 0; c < channels; ++c) {
    const BatchNormChannel ch =
        batchnorm_channel_eval(s.running_mean[c], s.running_var[c], s.eps, s.weight[c], s.bias[c],
                               s.coef[c], s.coef[channels + c]);
    s.stats[c] = ch.mean;
    s.stats[channels + c] = ch.invstd;
  }
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
