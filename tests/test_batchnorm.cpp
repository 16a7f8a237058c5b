// BatchNorm2d against PyTorch's formulas, written out here, and against
// central differences. Pooling: test_pooling.cpp.
#include <gtest/gtest.h>

#include "nn/exact_sum.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "nn/backend.h"
#include "nn/cpu/winograd_blocking.h"
#include "nn/cpu_isa.h"

#include "nn/batch_stats_reducer.h"
#include "nn/device_memory.h"
#include "nn/layers/batch_norm2d.h"
#include "support/cpu_backend.h"
#include "support/gradient_check.h"
#include "support/one_rank.h"

namespace lockstep::nn {
namespace {

using testing::check_layer_gradients;
using testing::fill_random;
using testing::GradCheckOptions;

BatchNorm2d make_bn(int64_t channels, bool relu = false) {
  BatchNorm2d bn(channels, relu);
  bn.set_name("bn");
  bn.reset_parameters(1, Device::kCpu);
  return bn;
}

// Sets weight to 1 + 0.1 c and bias to 0.2 c, so neither is trivial.
void set_affine(BatchNorm2d& bn) {
  auto params = bn.parameters();
  for (int64_t c = 0; c < params[0]->value.numel(); ++c) {
    params[0]->value.data()[c] = 1.0f + 0.1f * static_cast<float>(c);
    params[1]->value.data()[c] = 0.2f * static_cast<float>(c);
  }
}

TEST(BatchNorm2d, TrainingForwardMatchesPyTorchFormulas) {
  const int64_t N = 3, C = 2, H = 2, W = 3, M = N * H * W;
  BatchNorm2d bn = make_bn(C);
  set_affine(bn);
  Tensor x({N, C, H, W}), y({N, C, H, W});
  fill_random(x, 5, -2.0f, 3.0f);
  auto backend = testing::test_cpu_backend(1);
  bn.forward(*backend, x, y, {.training = true});
  const auto buffers = bn.buffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[0]->name, "bn.running_mean");
  EXPECT_EQ(buffers[1]->name, "bn.running_var");
  EXPECT_EQ(buffers[2]->name, "bn.num_batches_tracked");
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t s = 0; s < H * W; ++s) sum += x.data()[(n * C + c) * H * W + s];
    }
    const double mean = sum / M;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t s = 0; s < H * W; ++s) {
        const double d = x.data()[(n * C + c) * H * W + s] - mean;
        sq += d * d;
      }
    }
    const double var = sq / M;  // biased, for normalising
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t s = 0; s < H * W; ++s) {
        const int64_t i = (n * C + c) * H * W + s;
        const double want =
            (x.data()[i] - mean) / std::sqrt(var + 1e-5) * (1.0 + 0.1 * c) + 0.2 * c;
        EXPECT_NEAR(y.data()[i], want, 1e-5);
      }
    }
    // momentum 0.1, unbiased variance for the running estimate
    EXPECT_NEAR(buffers[0]->value.data()[c], 0.1 * mean, 1e-6);
    EXPECT_NEAR(buffers[1]->value.data()[c], 0.9 + 0.1 * var * M / (M - 1), 1e-6);
  }
  EXPECT_EQ(buffers[2]->value.data()[0], 1.0f);
  bn.forward(*backend, x, y, {.training = true});
  EXPECT_EQ(buffers[2]->value.data()[0], 2.0f);
}

TEST(BatchNorm2d, EvaluationUsesRunningStatisticsAndFusedRelu) {
  const int64_t C = 2;
  BatchNorm2d bn = make_bn(C, /*relu=*/true);
  set_affine(bn);
  auto buffers = bn.buffers();
  buffers[0]->value.data()[0] = 0.5f, buffers[0]->value.data()[1] = -1.0f;
  buffers[1]->value.data()[0] = 4.0f, buffers[1]->value.data()[1] = 0.25f;
  Tensor x({1, C, 1, 2}), y({1, C, 1, 2});
  const float xs[] = {2.5f, -3.0f, 0.0f, -2.0f};
  std::copy(xs, xs + 4, x.data());
  auto backend = testing::test_cpu_backend(1);
  bn.forward(*backend, x, y, {.training = false});
  auto expect = [](double v) { return std::max(0.0, v); };
  EXPECT_NEAR(y.data()[0], expect((2.5 - 0.5) / std::sqrt(4.0 + 1e-5)), 1e-6);
  EXPECT_NEAR(y.data()[1], expect((-3.0 - 0.5) / std::sqrt(4.0 + 1e-5)), 1e-6);
  EXPECT_NEAR(y.data()[2], expect((0.0 + 1.0) / std::sqrt(0.25 + 1e-5) * 1.1 + 0.2), 1e-5);
  EXPECT_NEAR(y.data()[3], expect((-2.0 + 1.0) / std::sqrt(0.25 + 1e-5) * 1.1 + 0.2), 1e-5);
  EXPECT_EQ(buffers[2]->value.data()[0], 0.0f) << "evaluation must not count batches";
  EXPECT_EQ(buffers[0]->value.data()[0], 0.5f) << "evaluation must not move running stats";
}

TEST(BatchNorm2d, TrainingGradientsMatchCentralDifferences) {
  for (bool relu : {false, true}) {
    BatchNorm2d bn = make_bn(3, relu);
    set_affine(bn);
    Tensor x({4, 3, 3, 2});
    fill_random(x, 11, -1.5f, 1.5f);
    check_layer_gradients(bn, x, {.training = true}, {.step = 1e-3f, .tolerance = 2e-2});
  }
}

TEST(BatchNorm2d, EvaluationGradientsMatchCentralDifferences) {
  BatchNorm2d bn = make_bn(2);
  set_affine(bn);
  bn.buffers()[0]->value.data()[1] = 0.3f;
  bn.buffers()[1]->value.data()[1] = 2.0f;
  Tensor x({2, 2, 2, 2});
  fill_random(x, 12);
  check_layer_gradients(bn, x, {.training = false});
}

// Device memory that is host memory and counts the copies made through it:
// what a layer with device tensors copies between the host and the device.
class CountingHostMemory final : public DeviceMemory {
 public:
  float* allocate(size_t bytes) override {
    return static_cast<float*>(std::calloc(std::max<size_t>(bytes, 1), 1));
  }
  void release(float* p) noexcept override { std::free(p); }
  void copy(void* dst, const void* src, size_t bytes) override {
    ++copies;
    std::memcpy(dst, src, bytes);
  }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  int copies = 0;
};

// Evaluation on a device copies nothing between the host and the device:
// the running statistics' coefficients are computed where they live
// (Backend::batchnorm_eval_coef), with the host computation's bits. A
// backward in evaluation mode still works (it reads the statistics back).
TEST(BatchNorm2d, EvaluationCopiesNothingBetweenHostAndDevice) {
  DeviceMemory* const previous = device_memory_or_null();
  CountingHostMemory memory;
  set_device_memory(&memory);
  {
    const int64_t N = 2, C = 3, H = 4, W = 5;
    for (const bool relu : {false, true}) {
      SCOPED_TRACE(relu ? "fused relu" : "no relu");
      BatchNorm2d host = make_bn(C, relu), device(C, relu);
      device.set_name("bn");
      device.reset_parameters(1, Device::kCuda);
      set_affine(host);
      set_affine(device);  // device tensors are host memory here: written directly
      for (BatchNorm2d* bn : {&host, &device}) {
        bn->buffers()[0]->value.data()[1] = 0.3f;
        bn->buffers()[1]->value.data()[2] = 2.5f;
      }
      Tensor x({N, C, H, W}), dy({N, C, H, W});
      fill_random(x, 31);
      fill_random(dy, 32);
      Tensor xd({N, C, H, W}, Device::kCuda), dyd({N, C, H, W}, Device::kCuda);
      xd.copy_from(x);
      dyd.copy_from(dy);
      Tensor y(x.shape()), yd(x.shape(), Device::kCuda);
      auto backend = testing::test_cpu_backend(1);
      memory.copies = 0;
      for (int batch = 0; batch < 3; ++batch) {
        device.forward(*backend, xd, yd, {.training = false});
      }
      EXPECT_EQ(memory.copies, 0) << "evaluation copied between the host and the device";
      host.forward(*backend, x, y, {.training = false});
      const auto bits = [](const Tensor& t) {
        return std::vector<float>(t.data(), t.data() + t.numel());
      };
      EXPECT_EQ(bits(yd), bits(y));
      Tensor dx(x.shape()), dxd(x.shape(), Device::kCuda);
      host.backward(*backend, x, y, dy, &dx);
      device.backward(*backend, xd, yd, dyd, &dxd);
      EXPECT_EQ(bits(dxd), bits(dx));
      for (size_t p = 0; p < 2; ++p) {
        EXPECT_EQ(bits(device.parameters()[p]->grad), bits(host.parameters()[p]->grad));
      }
    }
  }
  set_device_memory(previous);
}

// A reducer that doubles every sum: as if a second rank held the same batch.
class TwinRanks final : public BatchStatsReducer {
 public:
  void sum(std::span<double> values, std::string_view) override {
    for (double& v : values) v *= 2.0;
    ++calls;
  }
  void sum_exact(BinnedSum& sums, std::string_view) override {
    for (int64_t& b : sums.bins()) b *= 2;
    ++calls;
  }
  int calls = 0;
};

TEST(BatchNorm2d, ReducedStatisticsOfTwoIdenticalHalvesMatchTheWholeBatch) {
  // Two ranks holding the same x are one rank with x twice: same y, same dx,
  // half the parameter gradient (each rank's own sum).
  const int64_t N = 2, C = 2, H = 2, W = 2;
  BatchNorm2d half = make_bn(C), whole = make_bn(C);
  set_affine(half);
  set_affine(whole);
  Tensor x({N, C, H, W}), x2({2 * N, C, H, W}), dy({N, C, H, W}), dy2({2 * N, C, H, W});
  fill_random(x, 3);
  fill_random(dy, 4);
  for (int r = 0; r < 2; ++r) {
    std::copy(x.data(), x.data() + x.numel(), x2.data() + r * x.numel());
    std::copy(dy.data(), dy.data() + dy.numel(), dy2.data() + r * dy.numel());
  }
  auto backend = testing::test_cpu_backend(1);
  TwinRanks twins;
  Tensor y(x.shape()), y2(x2.shape()), dx(x.shape()), dx2(x2.shape());
  half.forward(*backend, x, y, {.training = true, .batch_stats = &twins});
  whole.forward(*backend, x2, y2, {.training = true});
  half.backward(*backend, x, y, dy, &dx);
  whole.backward(*backend, x2, y2, dy2, &dx2);
  EXPECT_EQ(twins.calls, 2) << "one reduction in forward, one in backward";
  for (int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_NEAR(y.data()[i], y2.data()[i], 1e-5);
    EXPECT_NEAR(dx.data()[i], dx2.data()[i], 1e-5);
  }
  for (size_t p = 0; p < 2; ++p) {
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_NEAR(2 * half.parameters()[p]->grad.data()[c], whole.parameters()[p]->grad.data()[c],
                  1e-5);
    }
  }
  for (size_t b = 0; b < 2; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_NEAR(half.buffers()[b]->value.data()[c], whole.buffers()[b]->value.data()[c], 1e-6);
    }
  }
}

// A one-rank SyncBatchNorm (testing::OneRank): the sums stay what they
// are, but the layer takes its host path (statistics read back, arithmetic
// on the host).

// The device path (Backend::batchnorm_train_forward / _backward, nothing
// read back) and the host path give the same bits: outputs, input and
// parameter gradients, running statistics, over two steps.
TEST(BatchNorm2d, DevicePathGivesTheHostPathsBits) {
  const int64_t N = 3, C = 4, H = 5, W = 3;
  for (const bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "fused relu" : "no relu");
    BatchNorm2d device = make_bn(C, relu), host = make_bn(C, relu);
    set_affine(device);
    set_affine(host);
    auto backend = testing::test_cpu_backend(1);
    testing::OneRank one;
    for (uint64_t step = 0; step < 2; ++step) {
      Tensor x({N, C, H, W}), dy({N, C, H, W});
      fill_random(x, 10 + step);
      fill_random(dy, 20 + step);
      Tensor y1(x.shape()), y2(x.shape()), dx1(x.shape()), dx2(x.shape());
      device.forward(*backend, x, y1, {.training = true});
      host.forward(*backend, x, y2, {.training = true, .batch_stats = &one});
      device.backward(*backend, x, y1, dy, &dx1);
      host.backward(*backend, x, y2, dy, &dx2);
      const auto bits = [](const Tensor& t) {
        return std::vector<float>(t.data(), t.data() + t.numel());
      };
      EXPECT_EQ(bits(y1), bits(y2));
      EXPECT_EQ(bits(dx1), bits(dx2));
      for (size_t p = 0; p < 2; ++p) {
        EXPECT_EQ(bits(device.parameters()[p]->grad), bits(host.parameters()[p]->grad));
      }
      for (size_t b = 0; b < 3; ++b) {
        EXPECT_EQ(bits(device.buffers()[b]->value), bits(host.buffers()[b]->value));
      }
    }
    EXPECT_EQ(one.calls, 4) << "the host path ran: two reductions a step";
  }
}

// The backend's channel sums against double, over plane sizes that leave a
// tail in every blocking step of the kernel (16-float vectors, 4 chains of
// them, a flush into double every 4096 elements), on both instruction sets
// and 1 or 3 threads (bit-identical: the order depends on the plane size).
TEST(BatchNormKernels, ChannelSumsMatchDoubleForEveryPlaneSize) {
  const int64_t N = 3, C = 3;
  std::vector<std::unique_ptr<Backend>> backends;
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    for (int threads : {1, 3}) backends.push_back(make_cpu_backend({threads, isa}));
  }
  for (int64_t S : {1, 5, 15, 16, 17, 49, 63, 64, 65, 196, 784, 4100}) {
    const BatchNormGeometry g{N, C, S};
    Tensor x({N, C, S}), y({N, C, S}), dy({N, C, S});
    fill_random(x, 11, 0.5f, 2.5f);  // a mean well away from zero
    fill_random(y, 12);              // the ReLU mask: y > 0 about half the time
    fill_random(dy, 13);
    std::vector<double> want(5 * C);  // sum x, sum x^2, sum dy, sum dy x, sum g' x
    std::vector<double> want_masked(C);
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t i = (n * C + c) * S; i < (n * C + c + 1) * S; ++i) {
          const double xi = x.data()[i], di = dy.data()[i], gi = y.data()[i] > 0.0f ? di : 0.0;
          want[c] += xi, want[C + c] += xi * xi;
          want[2 * C + c] += di, want[3 * C + c] += di * xi, want[4 * C + c] += gi * xi;
          want_masked[c] += gi;
        }
      }
    }
    std::vector<float> coef(2 * C, 0.0f);  // mean 0, invstd 1: sum_dy_xhat = sum g' x
    for (int64_t c = 0; c < C; ++c) coef[C + c] = 1.0f;
    std::vector<double> one_thread;
    for (size_t b = 0; b < backends.size(); ++b) {
      Backend* backend = backends[b].get();
      std::vector<double> got(7 * C);
      backend->batchnorm_stats(g, x.data(), got.data(), got.data() + C);
      backend->batchnorm_backward_sums(g, x.data(), nullptr, dy.data(), coef.data(),
                                       got.data() + 2 * C, got.data() + 3 * C);
      backend->batchnorm_backward_sums(g, x.data(), y.data(), dy.data(), coef.data(),
                                       got.data() + 5 * C, got.data() + 4 * C);
      const double count = static_cast<double>(N * S);
      for (int64_t c = 0; c < C; ++c) {
        // fp32 lanes of at most ~4100 / 64 + S / 64 terms each: 1e-6 of the
        // magnitude is a hundred times the expected rounding.
        for (int k = 0; k < 5; ++k) {
          EXPECT_NEAR(got[k * C + c], want[k * C + c], 1e-6 * 6.0 * count)
              << "S=" << S << " sum " << k << " channel " << c << " " << backend->name();
        }
        EXPECT_NEAR(got[5 * C + c], want_masked[c], 1e-6 * count) << "S=" << S;
      }
      if (b % 2 == 0) {
        one_thread = got;
      } else {
        EXPECT_EQ(got, one_thread) << "S=" << S << ": 3 threads differ from 1, " << backend->name();
      }
    }
  }
}

// A BatchNorm's outputs as large as the streaming threshold
// (winograd_stream_bytes: y and dx go past the caches through an L1
// buffer) have the bits of each channel's BatchNorm alone (below it,
// stored normally): forward with a residual add and ReLU, backward with
// the mask from y and from x, planes of 1,031 floats (vectors not aligned
// and partial), on both instruction sets.
TEST(BatchNormKernels, OutputsWrittenPastTheCachesHaveEachChannelsBits) {
  const int64_t N = 128, C = 8, S = 1031;  // 4.03 MiB: past the 4 MiB cap; one channel 0.5 MiB
  const BatchNormGeometry all{N, C, S}, one{N, 1, S};
  ASSERT_GE(N * C * S * static_cast<int64_t>(sizeof(float)), cpu::winograd_stream_bytes());
  ASSERT_LT(N * S * static_cast<int64_t>(sizeof(float)), cpu::winograd_stream_bytes());
  Tensor x({N, C, S}), add({N, C, S}), dy({N, C, S});
  fill_random(x, 31);
  fill_random(add, 32);
  fill_random(dy, 33);
  // the per-channel state of a BatchNorm over `channels` channels
  struct State {
    std::vector<float> weight, bias, running, tracked{0.0f}, coef, dweight, dbias;
    std::vector<double> stats;
    explicit State(int64_t channels)
        : weight(channels),
          bias(channels),
          running(2 * channels, 1.0f),
          coef(5 * channels),
          dweight(channels),
          dbias(channels),
          stats(2 * channels) {
      for (int64_t c = 0; c < channels; ++c) {
        weight[c] = 1.0f + 0.1f * static_cast<float>(c);
        bias[c] = 0.2f * static_cast<float>(c);
      }
    }
    BatchNormTrainState view(bool mask_from_x) {
      const auto channels = static_cast<int64_t>(weight.size());
      return {.weight = weight.data(),
              .bias = bias.data(),
              .running_mean = running.data(),
              .running_var = running.data() + channels,
              .num_batches_tracked = tracked.data(),
              .stats = stats.data(),
              .coef = coef.data(),
              .mask_from_x = mask_from_x};
    }
  };
  // channel c of a (N, C, S) tensor as (N, 1, S)
  const auto channel = [&](const Tensor& t, int64_t c) {
    Tensor out({N, 1, S});
    for (int64_t n = 0; n < N; ++n) {
      std::copy_n(t.data() + (n * C + c) * S, S, out.data() + n * S);
    }
    return out;
  };
  // forward (ReLU; the residual add unless the mask comes from x: no add
  // in between then) and backward of one BatchNorm
  const auto train = [](Backend& b, const BatchNormGeometry& g, State& st, bool from_x,
                        const Tensor& xt, const Tensor& addt, const Tensor& dyt, Tensor& y,
                        Tensor& dx) {
    if (from_x) {
      b.batchnorm_train_forward(g, st.view(true), xt.data(), true, y.data());
    } else {
      b.batchnorm_train_forward_add(g, st.view(false), xt.data(), addt.data(), true, y.data());
    }
    b.batchnorm_train_backward(g, st.view(from_x), xt.data(), y.data(), dyt.data(),
                               st.dweight.data(), st.dbias.data(), dx.data());
  };
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    auto backend = make_cpu_backend({2, isa});
    SCOPED_TRACE(backend->name());
    for (const bool from_x : {false, true}) {
      State big(C);
      Tensor y({N, C, S}), dx({N, C, S});
      train(*backend, all, big, from_x, x, add, dy, y, dx);
      for (int64_t c = 0; c < C; ++c) {
        State small(1);
        small.weight[0] = big.weight[c], small.bias[0] = big.bias[c];
        Tensor yc({N, 1, S}), dxc({N, 1, S});
        train(*backend, one, small, from_x, channel(x, c), channel(add, c), channel(dy, c), yc,
              dxc);
        const auto bits = [](const Tensor& t) {
          return std::vector<float>(t.data(), t.data() + t.numel());
        };
        EXPECT_EQ(bits(channel(y, c)), bits(yc)) << "y, channel " << c << ", from x " << from_x;
        EXPECT_EQ(bits(channel(dx, c)), bits(dxc)) << "dx, channel " << c << ", from x " << from_x;
        EXPECT_EQ(big.dweight[c], small.dweight[0]);
        EXPECT_EQ(big.dbias[c], small.dbias[0]);
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::nn
