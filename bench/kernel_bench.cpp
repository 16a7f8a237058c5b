// Micro benchmark of the CPU backend: every op of one training step of the
// MNIST reference net at batch 64, in the order the layers call them, timed
// one by one (median of repeats), then the whole step; plus the
// convolutions and linear layers of AlexNet-CIFAR at batch 128, and those of
// resnet20 with its BatchNorms, as fractions of the core's peak.
//
//   kernel_bench [bf16] [avx2|avx512] [direct] [cold] [mnist] [alexnet] [resnet20] [threads...]
//                (default: fp32, widest instruction set, Winograd where it applies,
//                every model, 1 2 threads; direct: no Winograd; cold: resnet20's
//                convolutions too start from memory, as in training, 64 MiB written
//                before each call, instead of repeating on tensors in the caches)
// First the core's peak for the kernels' instruction set: fp32 512-bit FMA
// and bf16 vdpbf16ps, or fp32 256-bit FMA for avx2 (bench/peak_flops.h).
// With LOCKSTEP_BENCH_CPU_TIME set, times are process CPU time (see now_us).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "bench/peak_flops.h"
#include "nn/backend.h"

namespace {

using lockstep::nn::Backend;
using lockstep::nn::Conv2dGeometry;
using lockstep::nn::DropoutGeometry;
using lockstep::nn::Pool2dGeometry;

// 64-byte aligned, as lockstep's tensors (nn/tensor.cpp): whole vectors and
// lines, as the kernels meet them in training (streaming stores included).
template <typename T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <typename U>
  explicit LineAligned(const LineAligned<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const LineAligned&) const = default;
};

struct Buffer {
  std::vector<float, LineAligned<float>> v;
  explicit Buffer(int64_t n) : v(static_cast<size_t>(n)) {
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>((i * 7919) % 2003) / 1001.0f - 1.0f;
  }
  float* p() { return v.data(); }
};

// Microseconds of wall time, or with LOCKSTEP_BENCH_CPU_TIME set, of CPU time
// of the whole process (all threads): steadier on a busy machine.
double now_us() {
  static const bool cpu_time = std::getenv("LOCKSTEP_BENCH_CPU_TIME") != nullptr;
  if (!cpu_time) {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// before (if any) runs untimed ahead of each timed call.
double median_us(const std::function<void()>& op, int reps,
                 const std::function<void()>& before = nullptr) {
  op();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    if (before) before();
    const double t0 = now_us();
    op();
    t.push_back(now_us() - t0);
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[reps / 2];
}

Conv2dGeometry conv(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t ks, int64_t s, int64_t p) {
  Conv2dGeometry g;
  g.batch = n, g.in_channels = c, g.in_h = hw, g.in_w = hw, g.out_channels = k;
  g.kernel_h = ks, g.kernel_w = ks, g.stride = s, g.pad = p;
  return g;
}

Pool2dGeometry pool(int64_t n, int64_t c, int64_t hw) {
  Pool2dGeometry g;
  g.batch = n, g.channels = c, g.in_h = hw, g.in_w = hw;
  return g;
}

struct Op {
  std::string name;
  std::function<void()> run;
};

// One training step of the MNIST net, as a list of backend calls.
std::vector<Op> mnist_step(Backend& b, std::vector<Buffer>& keep) {
  const int64_t N = 64;
  auto buf = [&](int64_t n) {
    keep.emplace_back(n);
    return keep.back().p();
  };
  keep.reserve(64);
  float *x = buf(N * 784), *w1 = buf(250), *b1 = buf(10), *a1 = buf(N * 5760), *p1 = buf(N * 1440),
        *r1 = buf(N * 1440), *w2 = buf(5000), *b2 = buf(20), *a2 = buf(N * 1280),
        *d2 = buf(N * 1280), *m2 = buf(N * 20), *p2 = buf(N * 320), *r2 = buf(N * 320),
        *fw1 = buf(16000), *fb1 = buf(50), *f1 = buf(N * 50), *r3 = buf(N * 50), *d3 = buf(N * 50),
        *m3 = buf(N * 50), *fw2 = buf(500), *fb2 = buf(10), *f2 = buf(N * 10), *out = buf(N * 10);
  float *g_out = buf(N * 10), *g_f2 = buf(N * 10), *g_fw2 = buf(500), *g_fb2 = buf(10),
        *g_d3 = buf(N * 50), *g_f1 = buf(N * 50), *g_fw1 = buf(16000), *g_fb1 = buf(50),
        *g_r2 = buf(N * 320), *g_d2 = buf(N * 1280), *g_w2 = buf(5000), *g_b2 = buf(20),
        *g_r1 = buf(N * 1440), *g_a1 = buf(N * 5760), *g_w1 = buf(250), *g_b1 = buf(10);
  float* vel = buf(21840);
  static std::vector<int64_t> ids(N);
  static std::vector<int32_t> labels(N);
  for (int64_t i = 0; i < N; ++i) ids[i] = i * 37, labels[i] = static_cast<int32_t>(i % 10);
  const Conv2dGeometry c1 = conv(N, 1, 28, 10, 5, 1, 0), c2 = conv(N, 10, 12, 20, 5, 1, 0);
  const Pool2dGeometry pl1 = pool(N, 10, 24), pl2 = pool(N, 20, 8);
  DropoutGeometry dr2, dr3;
  dr2.batch = N, dr2.channels = 20, dr2.spatial = 64;
  dr3.batch = N, dr3.channels = 50, dr3.spatial = 1;
  lockstep::nn::SgdParams sgd;
  sgd.momentum = 0.5f;
  sgd.lr = 0.0f;  // weights stay put: every step computes the same values
  return {
      {"conv1 forward", [=, &b] { b.conv2d_forward(c1, x, w1, b1, a1); }},
      {"pool1 forward", [=, &b] { b.maxpool2d_forward(pl1, a1, p1); }},
      {"relu1 forward", [=, &b] { b.relu_forward(N * 1440, p1, r1); }},
      {"conv2 forward", [=, &b] { b.conv2d_forward(c2, r1, w2, b2, a2); }},
      {"dropout2d forward", [=, &b] { b.dropout_forward(dr2, ids.data(), a2, d2, m2); }},
      {"pool2 forward", [=, &b] { b.maxpool2d_forward(pl2, d2, p2); }},
      {"relu2 forward", [=, &b] { b.relu_forward(N * 320, p2, r2); }},
      {"fc1 forward",
       [=, &b] {
         b.gemm(false, true, N, 50, 320, 1, r2, fw1, 0, f1);
         b.add_row_bias(N, 50, fb1, f1);
       }},
      {"relu3 forward", [=, &b] { b.relu_forward(N * 50, f1, r3); }},
      {"dropout forward", [=, &b] { b.dropout_forward(dr3, ids.data(), r3, d3, m3); }},
      {"fc2 forward",
       [=, &b] {
         b.gemm(false, true, N, 10, 50, 1, d3, fw2, 0, f2);
         b.add_row_bias(N, 10, fb2, f2);
       }},
      {"log_softmax forward", [=, &b] { b.log_softmax_forward(N, 10, f2, out); }},
      {"nll_loss", [=, &b] { b.nll_loss(N, 10, out, labels.data(), 1.0f / N, g_out); }},
      {"log_softmax backward", [=, &b] { b.log_softmax_backward(N, 10, out, g_out, g_f2); }},
      {"fc2 backward",
       [=, &b] {
         b.gemm(true, false, 10, 50, N, 1, g_f2, d3, 0, g_fw2);
         b.sum_rows(N, 10, g_f2, g_fb2);
         b.gemm(false, false, N, 50, 10, 1, g_f2, fw2, 0, g_d3);
       }},
      {"dropout backward", [=, &b] { b.dropout_backward(dr3, m3, g_d3, g_d3); }},
      {"relu3 backward", [=, &b] { b.relu_backward(N * 50, r3, g_d3, g_f1); }},
      {"fc1 backward",
       [=, &b] {
         b.gemm(true, false, 50, 320, N, 1, g_f1, r2, 0, g_fw1);
         b.sum_rows(N, 50, g_f1, g_fb1);
         b.gemm(false, false, N, 320, 50, 1, g_f1, fw1, 0, g_r2);
       }},
      {"relu2 backward", [=, &b] { b.relu_backward(N * 320, r2, g_r2, g_r2); }},
      {"pool2 backward", [=, &b] { b.maxpool2d_backward(pl2, d2, p2, g_r2, g_d2); }},
      {"dropout2d backward", [=, &b] { b.dropout_backward(dr2, m2, g_d2, g_d2); }},
      {"conv2 backward filter", [=, &b] { b.conv2d_backward_filter(c2, r1, g_d2, g_w2, g_b2); }},
      {"conv2 backward data", [=, &b] { b.conv2d_backward_data(c2, w2, g_d2, g_r1); }},
      {"relu1 backward", [=, &b] { b.relu_backward(N * 1440, r1, g_r1, g_r1); }},
      {"pool1 backward", [=, &b] { b.maxpool2d_backward(pl1, a1, p1, g_r1, g_a1); }},
      {"conv1 backward filter", [=, &b] { b.conv2d_backward_filter(c1, x, g_a1, g_w1, g_b1); }},
      {"sgd (8 tensors)",
       [=, &b] {
         float* p[8] = {w1, b1, w2, b2, fw1, fb1, fw2, fb2};
         float* g[8] = {g_w1, g_b1, g_w2, g_b2, g_fw1, g_fb1, g_fw2, g_fb2};
         const int64_t n[8] = {250, 10, 5000, 20, 16000, 50, 500, 10};
         int64_t off = 0;
         for (int i = 0; i < 8; ++i) {
           b.sgd_update(n[i], sgd, p[i], g[i], vel + off);
           off += n[i];
         }
       }},
  };
}

lockstep::nn::Precision precision = lockstep::nn::Precision::kFp32;
std::optional<lockstep::nn::CpuIsa> isa_cap;  // the kernels' instruction set, at most
bool winograd = true;                         // CpuBackendOptions::winograd
bool cold = false;                            // resnet20's convolutions from memory

// Writes 64 MiB, so that the next op finds its tensors in memory, as in
// training (a step's tensors are far larger than the caches).
void flush_caches() {
  static std::vector<float> evict(size_t{16} << 20);
  for (size_t i = 0; i < evict.size(); i += 16) evict[i] += 1.0f;
}

// Each op is timed inside whole steps (caches as in training), median of
// 300 steps; the step total is timed separately.
void bench_mnist(int threads) {
  auto b = lockstep::nn::make_cpu_backend(
      {.threads = threads, .isa_cap = isa_cap, .winograd = winograd});
  std::vector<Buffer> keep;
  const std::vector<Op> ops = mnist_step(*b, keep);
  const int steps = 300;
  std::vector<std::vector<double>> times(ops.size());
  std::vector<double> totals;
  for (int r = 0; r < steps + 10; ++r) {
    const double start = now_us();
    for (size_t i = 0; i < ops.size(); ++i) {
      const double t0 = now_us();
      ops[i].run();
      if (r >= 10) times[i].push_back(now_us() - t0);
    }
    if (r >= 10) totals.push_back(now_us() - start);
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  std::printf("\nMNIST net, batch 64, %s: per op (median us)\n", b->name().c_str());
  double sum = 0.0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const double us = median(times[i]);
    sum += us;
    std::printf("  %-24s %8.1f\n", ops[i].name.c_str(), us);
  }
  const double step = median(totals);
  std::printf("  %-24s %8.1f (sum of medians %.1f)\n  => %.0f images/s (backend ops only)\n",
              "whole step", step, sum, 64.0 / step * 1e6);
}

// One core's peak for `precision` (fp32: vfmadd; bf16: vdpbf16ps), GFLOP/s;
// 0 when not measured (no AVX-512).
double core_peak_gflops = 0.0;

void bench_alexnet(int threads) {
  auto b = lockstep::nn::make_cpu_backend(
      {.threads = threads, .isa_cap = isa_cap, .precision = precision, .winograd = winograd});
  std::printf("\nAlexNet-CIFAR, batch 128, %s: median ms (GFLOP/s)\n", b->name().c_str());
  const int64_t N = 128;
  const Conv2dGeometry convs[5] = {conv(N, 3, 32, 64, 3, 2, 1), conv(N, 64, 8, 192, 3, 1, 1),
                                   conv(N, 192, 4, 384, 3, 1, 1), conv(N, 384, 4, 256, 3, 1, 1),
                                   conv(N, 256, 4, 256, 3, 1, 1)};
  double total = 0.0, total_flop = 0.0;
  for (int i = 0; i < 5; ++i) {
    const Conv2dGeometry& g = convs[i];
    // Outputs go to their own buffers, so inputs never grow across repeats.
    Buffer x(N * g.in_channels * g.in_h * g.in_w), w(g.out_channels * g.in_channels * 9),
        bias(g.out_channels), y(N * g.out_channels * g.out_h() * g.out_w()), dx(x.v.size()),
        dw(w.v.size()), db(bias.v.size());
    const double flop = 2.0 * N * g.out_channels * g.in_channels * 9 * g.out_h() * g.out_w();
    const double f = median_us([&] { b->conv2d_forward(g, x.p(), w.p(), bias.p(), y.p()); }, 10);
    const double d = median_us([&] { b->conv2d_backward_data(g, w.p(), y.p(), dx.p()); }, 10);
    const double wf =
        median_us([&] { b->conv2d_backward_filter(g, x.p(), y.p(), dw.p(), db.p()); }, 10);
    total += f + (i > 0 ? d : 0.0) + wf;
    total_flop += flop * (i > 0 ? 3 : 2);
    std::printf("  conv%d fwd %7.2f (%3.0f)  bwd data %7.2f (%3.0f)  bwd filter %7.2f (%3.0f)\n",
                i + 1, f / 1e3, flop / f / 1e3, d / 1e3, flop / d / 1e3, wf / 1e3, flop / wf / 1e3);
  }
  const int64_t fc[3][2] = {{1024, 4096}, {4096, 4096}, {4096, 10}};
  for (int i = 0; i < 3; ++i) {
    const int64_t in = fc[i][0], out = fc[i][1];
    Buffer x(N * in), w(in * out), y(N * out), dw(in * out), dx(N * in);
    const double flop = 2.0 * N * in * out;
    const double f =
        median_us([&] { b->gemm(false, true, N, out, in, 1, x.p(), w.p(), 0, y.p()); }, 10);
    const double gw =
        median_us([&] { b->gemm(true, false, out, in, N, 1, y.p(), x.p(), 0, dw.p()); }, 10);
    const double gx =
        median_us([&] { b->gemm(false, false, N, in, out, 1, y.p(), w.p(), 0, dx.p()); }, 10);
    total += f + gw + gx;
    total_flop += 3 * flop;
    std::printf("  fc%d   fwd %7.2f (%3.0f)  bwd data %7.2f (%3.0f)  bwd weight %7.2f (%3.0f)\n",
                i + 1, f / 1e3, flop / f / 1e3, gx / 1e3, flop / gx / 1e3, gw / 1e3,
                flop / gw / 1e3);
  }
  std::printf("  conv + linear total %.1f ms per step => %.0f images/s, %.0f GFLOP/s", total / 1e3,
              N / total * 1e6, total_flop / total / 1e3);
  if (core_peak_gflops > 0.0) {
    std::printf(" = %.0f%% of %d core%s' %s peak",
                100.0 * total_flop / total / 1e3 / threads / core_peak_gflops, threads,
                threads == 1 ? "" : "s",
                precision == lockstep::nn::Precision::kBf16 ? "vdpbf16ps" : "FMA");
  }
  std::printf("\n");
}

// The convolutions and BatchNorms of one resnet20 training step at batch
// 128, one line per distinct shape (count: how often the step runs it), each
// op in GFLOP/s and as a fraction of the core's peak for the kernels'
// instruction set; then the whole step of these ops. The stem has no
// backward data (nothing below it needs dx).
void bench_resnet20(int threads) {
  auto b = lockstep::nn::make_cpu_backend(
      {.threads = threads, .isa_cap = isa_cap, .precision = precision, .winograd = winograd});
  std::printf(
      "\nresnet20, batch 128, %s, %s: median ms (GFLOP/s, %% of %d core%s' peak; for "
      "Winograd the direct convolution's flops over its time; convolutions %s)\n",
      b->name().c_str(), b->kernels().convolutions.c_str(), threads, threads == 1 ? "" : "s",
      cold ? "from memory" : "on tensors in the caches");
  const int64_t N = 128;
  struct Shape {
    const char* name;
    Conv2dGeometry g;
    int count;
    bool data_grad;
  };
  const Shape shapes[] = {{"stem 3->16 32x32", conv(N, 3, 32, 16, 3, 1, 1), 1, false},
                          {"16->16 32x32", conv(N, 16, 32, 16, 3, 1, 1), 6, true},
                          {"16->32 s2 32x32", conv(N, 16, 32, 32, 3, 2, 1), 1, true},
                          {"32->32 16x16", conv(N, 32, 16, 32, 3, 1, 1), 5, true},
                          {"32->64 s2 16x16", conv(N, 32, 16, 64, 3, 2, 1), 1, true},
                          {"64->64 8x8", conv(N, 64, 8, 64, 3, 1, 1), 5, true}};
  const double peak = core_peak_gflops * threads;
  const auto rate = [&](double flop, double us) {
    static char text[48];
    const double gflops = flop / us / 1e3;
    if (peak > 0.0) {
      std::snprintf(text, sizeof text, "%4.0f %3.0f%%", gflops, 100.0 * gflops / peak);
    } else {
      std::snprintf(text, sizeof text, "%4.0f", gflops);
    }
    return std::string(text);
  };
  double total = 0.0, total_flop = 0.0;
  for (const Shape& s : shapes) {
    const Conv2dGeometry& g = s.g;
    Buffer x(N * g.in_channels * g.in_h * g.in_w), w(g.out_channels * g.in_channels * 9),
        y(N * g.out_channels * g.out_h() * g.out_w()), dx(x.v.size()), dw(w.v.size());
    const double flop = 2.0 * N * g.out_channels * g.in_channels * 9 * g.out_h() * g.out_w();
    // no biases, as in the model (its BatchNorms have them)
    const std::function<void()> before = cold ? flush_caches : std::function<void()>();
    const double f =
        median_us([&] { b->conv2d_forward(g, x.p(), w.p(), nullptr, y.p()); }, 7, before);
    const double d =
        s.data_grad
            ? median_us([&] { b->conv2d_backward_data(g, w.p(), y.p(), dx.p()); }, 7, before)
            : 0;
    const double wf =
        median_us([&] { b->conv2d_backward_filter(g, x.p(), y.p(), dw.p(), nullptr); }, 7, before);
    total += s.count * (f + d + wf);
    total_flop += s.count * flop * (s.data_grad ? 3 : 2);
    std::printf("  %-17s x%d fwd %6.2f (%s)  bwd data %6.2f (%s)  bwd filter %6.2f (%s)\n", s.name,
                s.count, f / 1e3, rate(flop, f).c_str(), d / 1e3,
                s.data_grad ? rate(flop, d).c_str() : "    -", wf / 1e3, rate(flop, wf).c_str());
  }
  const double conv_us = total;
  // BatchNorm with its fused ReLU, the training ops as the model runs them
  // (the backward's mask from x), per shape; from memory, as in training
  // (a step's tensors are far larger than the caches): 64 MiB written
  // between calls.
  const struct {
    int64_t channels, spatial;
    int count;
  } norms[] = {{16, 1024, 7}, {32, 256, 6}, {64, 64, 6}};
  double bn_us = 0.0;
  for (const auto& n : norms) {
    const lockstep::nn::BatchNormGeometry g{N, n.channels, n.spatial};
    const int64_t size = N * n.channels * n.spatial;
    Buffer x(size), y(size), dy(size), dx(size), weight(n.channels), bias(n.channels),
        running(2 * n.channels), tracked(1), coef(5 * n.channels), dweight(n.channels),
        dbias(n.channels);
    std::vector<double> stats(static_cast<size_t>(2 * n.channels));
    const lockstep::nn::BatchNormTrainState s{.weight = weight.p(),
                                              .bias = bias.p(),
                                              .running_mean = running.p(),
                                              .running_var = running.p() + n.channels,
                                              .num_batches_tracked = tracked.p(),
                                              .stats = stats.data(),
                                              .coef = coef.p(),
                                              .mask_from_x = true};
    const double us =
        median_us([&] { b->batchnorm_train_forward(g, s, x.p(), true, y.p()); }, 7, flush_caches) +
        median_us(
            [&] {
              b->batchnorm_train_backward(g, s, x.p(), y.p(), dy.p(), dweight.p(), dbias.p(),
                                          dx.p());
            },
            7, flush_caches);
    bn_us += n.count * us;
    // moved: x twice, y once; x and dy twice, dx once
    std::printf("  batchnorm+relu  %3lldx%-4lld x%d  fwd + bwd %6.2f ms (%.1f GB/s moved)\n",
                static_cast<long long>(n.channels), static_cast<long long>(n.spatial), n.count,
                us / 1e3, 4.0 * 8 * static_cast<double>(size) / us / 1e3);
  }
  std::printf(
      "  convolutions %.1f ms (%s GFLOP/s, %%), batchnorm %.1f ms per step => %.0f images/s\n",
      conv_us / 1e3, rate(total_flop, conv_us).c_str(), bn_us / 1e3, N / (conv_us + bn_us) * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "bf16") {
      precision = lockstep::nn::Precision::kBf16;
    } else if (arg == "direct") {
      winograd = false;
    } else if (arg == "cold") {
      cold = true;
    } else if (arg.starts_with("avx")) {
      isa_cap = lockstep::nn::parse_cpu_isa(arg, "kernel_bench argument");
    } else if (arg == "mnist" || arg == "alexnet" || arg == "resnet20") {
      models.push_back(arg);
    } else {
      threads.push_back(std::atoi(argv[i]));
    }
  }
  if (threads.empty()) threads = {1, 2};
  if (models.empty()) models = {"mnist", "alexnet", "resnet20"};
  const lockstep::nn::CpuIsa isa = lockstep::nn::choose_cpu_isa(isa_cap);
  if (isa == lockstep::nn::CpuIsa::kAvx512) {
    const double fma = lockstep::bench::fp32_fma_peak_gflops();
    std::printf("peak of one core: fp32 FMA %.1f GFLOP/s", fma);
    core_peak_gflops = fma;
    if (lockstep::nn::cpu_has_avx512_bf16()) {
      const double dot = lockstep::bench::bf16_dot_peak_gflops();
      std::printf(", bf16 vdpbf16ps %.1f GFLOP/s (%.2fx)", dot, dot / fma);
      if (precision == lockstep::nn::Precision::kBf16) core_peak_gflops = dot;
      std::printf(", AMX-BF16 %s",
                  lockstep::nn::cpu_has_amx_bf16() ? "present (unused)" : "absent");
    } else if (precision == lockstep::nn::Precision::kBf16) {
      core_peak_gflops = 0.0;
    }
    std::printf("\n");
  } else if (precision == lockstep::nn::Precision::kFp32) {
    core_peak_gflops = lockstep::bench::fp32_fma256_peak_gflops();
    std::printf("peak of one core: fp32 256-bit FMA %.1f GFLOP/s (the avx2 kernels' peak)\n",
                core_peak_gflops);
  }
  const auto wanted = [&](const char* name) {
    return std::find(models.begin(), models.end(), name) != models.end();
  };
  if (wanted("mnist"))
    for (int t : threads) bench_mnist(t);
  if (wanted("alexnet"))
    for (int t : threads) bench_alexnet(t);
  if (wanted("resnet20"))
    for (int t : threads) bench_resnet20(t);
  return 0;
}
