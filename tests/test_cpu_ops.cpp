// The CPU backend's element-wise ops, dropout, softmax and losses, and
// optimizer updates: against references written here and hand-computed
// values; 1 and 2 threads must agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "nn/backend.h"
#include "nn/counter_rng.h"
#include "nn/error.h"
#include "nn/tensor.h"
#include "support/gradient_check.h"

namespace lockstep::nn {
namespace {

using testing::fill_random;

Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(shape);
  fill_random(t, seed, lo, hi);
  return t;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

// --- relu and small vector helpers -----------------------------------------

TEST(CpuElementwise, ReluForwardBackwardAndInPlace) {
  auto backend = make_cpu_backend(2);
  const int64_t n = 100003;  // several chunks and a ragged end
  const Tensor x = random_tensor({n}, 1);
  const Tensor dy = random_tensor({n}, 2);
  Tensor y({n}), dx({n});
  backend->relu_forward(n, x.data(), y.data());
  backend->relu_backward(n, y.data(), dy.data(), dx.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y.data()[i], x.data()[i] > 0 ? x.data()[i] : 0.0f) << i;
    ASSERT_EQ(dx.data()[i], x.data()[i] > 0 ? dy.data()[i] : 0.0f) << i;
  }
  Tensor inplace = x.clone();
  backend->relu_forward(n, inplace.data(), inplace.data());
  EXPECT_TRUE(bitwise_equal(inplace, y));
  Tensor grad = dy.clone();
  backend->relu_backward(n, y.data(), grad.data(), grad.data());
  EXPECT_TRUE(bitwise_equal(grad, dx));
}

TEST(CpuElementwise, FillScaleAxpyCopy) {
  auto backend = make_cpu_backend(2);
  const int64_t n = 70001;
  const Tensor x = random_tensor({n}, 3);
  Tensor y = random_tensor({n}, 4);
  const Tensor y0 = y.clone();
  backend->axpy(n, 0.5f, x.data(), y.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y.data()[i], y0.data()[i] + 0.5f * x.data()[i]);
  backend->scale(n, -2.0f, y.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(y.data()[i], -2.0f * (y0.data()[i] + 0.5f * x.data()[i]));
  }
  backend->copy(n, x.data(), y.data());
  EXPECT_TRUE(bitwise_equal(x, y));
  backend->fill(n, 1.25f, y.data());
  for (float v : y.span()) ASSERT_EQ(v, 1.25f);
}

TEST(CpuElementwise, RowBiasAndColumnSums) {
  auto backend = make_cpu_backend(2);
  const int64_t rows = 300, cols = 130;
  const Tensor bias = random_tensor({cols}, 5);
  const Tensor dy = random_tensor({rows, cols}, 6);
  Tensor y = dy.clone();
  backend->add_row_bias(rows, cols, bias.data(), y.data());
  Tensor db({cols});
  backend->sum_rows(rows, cols, dy.data(), db.data());
  for (int64_t j = 0; j < cols; ++j) {
    double sum = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(y.data()[r * cols + j], dy.data()[r * cols + j] + bias.data()[j]);
      sum += dy.data()[r * cols + j];
    }
    EXPECT_NEAR(db.data()[j], sum, 1e-4) << "column " << j;
  }
}

// --- dropout -----------------------------------------------------------------

DropoutGeometry dropout_geometry(int64_t n, int64_t c, int64_t s, float p, uint64_t stream) {
  DropoutGeometry g;
  g.batch = n, g.channels = c, g.spatial = s, g.p = p, g.seed = 42, g.stream = stream;
  return g;
}

TEST(CpuDropout, MaskFollowsTheCounterGeneratorAndBroadcastsOverChannels) {
  auto backend = make_cpu_backend(2);
  const DropoutGeometry g = dropout_geometry(5, 7, 6, 0.4f, 3);
  const std::vector<int64_t> ids = {10, 3, 999, 0, 123456789};
  const Tensor x = random_tensor({g.batch, g.channels, g.spatial}, 7);
  const Tensor dy = random_tensor({g.batch, g.channels, g.spatial}, 8);
  Tensor y(x.shape()), mask({g.batch, g.channels}), dx(x.shape());
  backend->dropout_forward(g, ids.data(), x.data(), y.data(), mask.data());
  backend->dropout_backward(g, mask.data(), dy.data(), dx.data());
  const float keep = 1.0f / (1.0f - g.p);
  const uint64_t key = hash_combine(g.seed, g.stream);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      const uint64_t counter = static_cast<uint64_t>(ids[n]) * g.channels + c;
      const float want = counter_uniform(key, counter) >= g.p ? keep : 0.0f;
      const float m = mask.data()[n * g.channels + c];
      ASSERT_EQ(m, want) << "n " << n << " c " << c;
      for (int64_t s = 0; s < g.spatial; ++s) {
        const int64_t i = (n * g.channels + c) * g.spatial + s;
        ASSERT_EQ(y.data()[i], x.data()[i] * m);
        ASSERT_EQ(dx.data()[i], dy.data()[i] * m);
      }
    }
  }
}

TEST(CpuDropout, KeptFractionIsOneMinusPAndValuesAreZeroOrScaled) {
  auto backend = make_cpu_backend(2);
  const DropoutGeometry g = dropout_geometry(1000, 100, 1, 0.3f, 1);
  std::vector<int64_t> ids(g.batch);
  for (int64_t i = 0; i < g.batch; ++i) ids[i] = 7 * i + 1;
  Tensor x({g.batch, g.channels}), y(x.shape()), mask(x.shape());
  backend->fill(x.numel(), 1.0f, x.data());
  backend->dropout_forward(g, ids.data(), x.data(), y.data(), mask.data());
  int64_t kept = 0;
  for (float m : mask.span()) {
    ASSERT_TRUE(m == 0.0f || m == 1.0f / (1.0f - 0.3f)) << m;
    kept += m != 0.0f;
  }
  // 100000 Bernoulli(0.7) draws: standard deviation 0.0014.
  EXPECT_NEAR(static_cast<double>(kept) / mask.numel(), 0.7, 0.01);
}

TEST(CpuDropout, SameSampleGetsTheSameMaskAtAnyBatchPosition) {
  auto backend = make_cpu_backend(2);
  const DropoutGeometry g = dropout_geometry(3, 64, 4, 0.5f, 9);
  const std::vector<int64_t> first = {5, 9, 2}, second = {2, 7, 5};
  Tensor x({3, 64, 4}), y(x.shape()), m1({3, 64}), m2({3, 64});
  backend->fill(x.numel(), 1.0f, x.data());
  backend->dropout_forward(g, first.data(), x.data(), y.data(), m1.data());
  backend->dropout_forward(g, second.data(), x.data(), y.data(), m2.data());
  for (int64_t c = 0; c < 64; ++c) {
    EXPECT_EQ(m1.data()[0 * 64 + c], m2.data()[2 * 64 + c]) << "sample 5, channel " << c;
    EXPECT_EQ(m1.data()[2 * 64 + c], m2.data()[0 * 64 + c]) << "sample 2, channel " << c;
  }
  // Another stream (layer or epoch) draws another mask.
  Tensor m3({3, 64});
  backend->dropout_forward(dropout_geometry(3, 64, 4, 0.5f, 10), first.data(), x.data(), y.data(),
                           m3.data());
  EXPECT_FALSE(bitwise_equal(m1, m3));
}

// --- log-softmax and losses ------------------------------------------------------

TEST(CpuSoftmax, LogSoftmaxForwardBackwardMatchReference) {
  auto backend = make_cpu_backend(2);
  const int64_t rows = 37, cols = 11;
  const Tensor x = random_tensor({rows, cols}, 9, -20.0f, 20.0f);
  const Tensor dy = random_tensor({rows, cols}, 10);
  Tensor y(x.shape()), dx(x.shape());
  backend->log_softmax_forward(rows, cols, x.data(), y.data());
  backend->log_softmax_backward(rows, cols, y.data(), dy.data(), dx.data());
  for (int64_t i = 0; i < rows; ++i) {
    double top = -1e300, sum = 0.0, dsum = 0.0;
    for (int64_t j = 0; j < cols; ++j) top = std::max(top, double{x.data()[i * cols + j]});
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x.data()[i * cols + j] - top);
    for (int64_t j = 0; j < cols; ++j) dsum += dy.data()[i * cols + j];
    for (int64_t j = 0; j < cols; ++j) {
      const double ly = x.data()[i * cols + j] - top - std::log(sum);
      EXPECT_NEAR(y.data()[i * cols + j], ly, 1e-5 * (1 + std::abs(ly)));
      EXPECT_NEAR(dx.data()[i * cols + j], dy.data()[i * cols + j] - std::exp(ly) * dsum, 1e-5);
    }
  }
}

TEST(CpuSoftmax, LogSoftmaxIsStableForHugeLogits) {
  auto backend = make_cpu_backend(1);
  const float x[3] = {1000.0f, 0.0f, -1000.0f};
  float y[3];
  backend->log_softmax_forward(1, 3, x, y);
  EXPECT_FLOAT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[1], -1000.0f);
  EXPECT_FLOAT_EQ(y[2], -2000.0f);
}

TEST(CpuLoss, NllLossValuesCountsAndGradient) {
  auto backend = make_cpu_backend(2);
  // Row 0: argmax 1 (label 1, correct); row 1: tie between 0 and 2, first
  // wins (label 2: wrong); row 2: label 0, argmax 2.
  const float logp[9] = {-2.0f, -0.5f, -3.0f, -1.0f, -4.0f, -1.0f, -2.5f, -3.5f, -0.25f};
  const int32_t labels[3] = {1, 2, 0};
  float dlogp[9];
  std::fill(dlogp, dlogp + 9, std::numeric_limits<float>::quiet_NaN());
  const LossStats s = backend->nll_loss(3, 3, logp, labels, 0.5f, dlogp);
  EXPECT_DOUBLE_EQ(s.loss_sum, 0.5 + 1.0 + 2.5);
  EXPECT_EQ(s.correct, 1);
  EXPECT_EQ(s.count, 3);
  const float want[9] = {0, -0.5f, 0, 0, 0, -0.5f, -0.5f, 0, 0};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(dlogp[i], want[i]) << i;
  // No gradient requested.
  EXPECT_DOUBLE_EQ(backend->nll_loss(3, 3, logp, labels, 1.0f, nullptr).loss_sum, 4.0);
}

TEST(CpuLoss, LabelOutsideTheClassesIsAnInputErrorNamingRowAndLabel) {
  auto backend = make_cpu_backend(1);
  const float logp[6] = {0, 0, 0, 0, 0, 0};
  const int32_t labels[2] = {1, 10};
  for (int op = 0; op < 2; ++op) {
    try {
      if (op == 0) backend->nll_loss(2, 3, logp, labels, 1.0f, nullptr);
      if (op == 1) backend->softmax_cross_entropy(2, 3, logp, labels, 1.0f, nullptr);
      ADD_FAILURE() << "no InputError for label 10 of 3 classes";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("row 1"), std::string::npos) << what;
      EXPECT_NE(what.find("label 10"), std::string::npos) << what;
    }
  }
  const int32_t negative[2] = {-1, 0};
  EXPECT_THROW(backend->nll_loss(2, 3, logp, negative, 1.0f, nullptr), InputError);
}

TEST(CpuLoss, SoftmaxCrossEntropyMatchesReferenceAndIsStable) {
  auto backend = make_cpu_backend(2);
  const int64_t rows = 20, cols = 7;
  Tensor logits = random_tensor({rows, cols}, 11, -5.0f, 5.0f);
  logits.data()[0] = 1000.0f;  // row 0: huge logits stay finite
  logits.data()[1] = -1000.0f;
  std::vector<int32_t> labels(rows);
  for (int64_t i = 0; i < rows; ++i) labels[i] = static_cast<int32_t>((i * 3) % cols);
  Tensor d(logits.shape());
  const float scale = 1.0f / rows;
  const LossStats s =
      backend->softmax_cross_entropy(rows, cols, logits.data(), labels.data(), scale, d.data());
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = logits.data() + i * cols;
    const double top = *std::max_element(x, x + cols);
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x[j] - top);
    const double lse = top + std::log(sum);
    loss += lse - x[labels[i]];
    correct += std::max_element(x, x + cols) - x == labels[i];
    for (int64_t j = 0; j < cols; ++j) {
      const double want = scale * (std::exp(x[j] - lse) - (j == labels[i] ? 1.0 : 0.0));
      EXPECT_NEAR(d.data()[i * cols + j], want, 1e-6) << i << "," << j;
    }
  }
  EXPECT_TRUE(std::isfinite(s.loss_sum));
  EXPECT_NEAR(s.loss_sum, loss, 1e-4 * (1 + loss));
  EXPECT_EQ(s.correct, correct);
  EXPECT_EQ(s.count, rows);
}

// --- optimizers ------------------------------------------------------------------

const float kGrads[3] = {0.5f, -0.25f, 1.0f};

// w = 1; lr 0.1, momentum 0.9, dampening 0.1, weight decay 0.01. Expected
// (w, velocity) after each step, computed by hand from torch.optim.SGD's
// formulas.
TEST(CpuOptimizer, SgdMomentumDampeningWeightDecayMatchHandComputed) {
  const double plain[3][2] = {{0.949, 0.51}, {0.9247459, 0.242541}, {0.8120849387, 1.1266096131}};
  const double nesterov[3][2] = {
      {0.9031, 0.51}, {0.905405389, 0.2421279}, {0.7031542453, 1.1260637585}};
  for (bool use_nesterov : {false, true}) {
    auto backend = make_cpu_backend(1);
    float w = 1.0f, v = 123.0f;  // the first step must ignore the stale buffer
    for (int t = 0; t < 3; ++t) {
      SgdParams p;
      p.lr = 0.1f, p.momentum = 0.9f, p.dampening = 0.1f, p.weight_decay = 0.01f;
      p.nesterov = use_nesterov, p.first_step = t == 0;
      backend->sgd_update(1, p, &w, &kGrads[t], &v);
      const auto& want = use_nesterov ? nesterov[t] : plain[t];
      EXPECT_NEAR(w, want[0], 1e-6) << "nesterov " << use_nesterov << " step " << t;
      EXPECT_NEAR(v, want[1], 1e-6) << "nesterov " << use_nesterov << " step " << t;
    }
  }
}

TEST(CpuOptimizer, SgdWithoutMomentumLeavesVelocityAlone) {
  auto backend = make_cpu_backend(1);
  float w = 2.0f, g = 0.5f, v = 7.0f;
  SgdParams p;
  p.lr = 0.1f;
  backend->sgd_update(1, p, &w, &g, &v);
  EXPECT_FLOAT_EQ(w, 1.95f);
  EXPECT_EQ(v, 7.0f);
}

// w = 1; lr 0.01, betas (0.9, 0.999), eps 1e-8. Expected (w, m, v) per step,
// computed by hand from torch.optim.Adam's formulas.
TEST(CpuOptimizer, AdamMatchesHandComputed) {
  const double no_decay[3][3] = {{0.9900000002, 0.05, 0.00025},
                                 {0.9873366299, 0.02, 0.00031225},
                                 {0.980755514, 0.118, 0.0013119378}};
  const double decay[3][3] = {{0.9900000002, 0.06, 0.00036},
                              {0.9853191993, 0.0389, 0.000382441},
                              {0.9779775548, 0.144863192, 0.0015888309}};
  for (float wd : {0.0f, 0.1f}) {
    auto backend = make_cpu_backend(1);
    float w = 1.0f, m = 0.0f, v = 0.0f;
    for (int t = 0; t < 3; ++t) {
      AdamParams p;
      p.lr = 0.01f, p.weight_decay = wd, p.step = t + 1;
      backend->adam_update(1, p, &w, &kGrads[t], &m, &v);
      const auto& want = wd == 0.0f ? no_decay[t] : decay[t];
      EXPECT_NEAR(w, want[0], 1e-6) << "wd " << wd << " step " << t;
      EXPECT_NEAR(m, want[1], 1e-6) << "wd " << wd << " step " << t;
      // beta2 reaches the backend as a float, so 1 - beta2 is off by ~1.3e-5
      // relative to the decimal 0.001 the hand computation used.
      EXPECT_NEAR(v, want[2], 2e-5 * want[2]) << "wd " << wd << " step " << t;
    }
  }
}

// --- one thread and two threads agree ------------------------------------------------

TEST(CpuThreads, ElementwiseOpsAreBitwiseIdenticalWithOneAndTwoThreads) {
  auto one = make_cpu_backend(1);
  auto two = make_cpu_backend(2);
  const int64_t n = 200000;
  const Tensor x = random_tensor({n}, 12), g = random_tensor({n}, 13);
  std::vector<Tensor> out;
  for (Backend* b : {one.get(), two.get()}) {
    Tensor w = x.clone(), m({n}), v({n}), vel({n}), y({n});
    SgdParams sp;
    sp.momentum = 0.9f, sp.weight_decay = 1e-4f, sp.first_step = true;
    b->sgd_update(n, sp, w.data(), g.data(), vel.data());
    AdamParams ap;
    ap.weight_decay = 1e-3f;
    b->adam_update(n, ap, w.data(), g.data(), m.data(), v.data());
    b->relu_forward(n, w.data(), y.data());
    b->axpy(n, 0.3f, g.data(), y.data());
    const DropoutGeometry dg = dropout_geometry(400, 50, 10, 0.5f, 2);
    std::vector<int64_t> ids(400);
    for (int64_t i = 0; i < 400; ++i) ids[i] = i * 13;
    Tensor mask({400, 50}), dropped({n});
    b->dropout_forward(dg, ids.data(), y.data(), dropped.data(), mask.data());
    Tensor lsm({n});
    b->log_softmax_forward(n / 100, 100, dropped.data(), lsm.data());
    out.push_back(std::move(w));
    out.push_back(std::move(vel));
    out.push_back(std::move(lsm));
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(bitwise_equal(out[i], out[i + 3])) << i;
}

// |a - b| <= 1e-5 * max |a| element by element: reductions summed in another
// order by two threads.
void expect_close_relative(const Tensor& a, const Tensor& b, const char* what) {
  float scale = 0.0f;
  for (float v : a.span()) scale = std::max(scale, std::abs(v));
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_NEAR(a.data()[i], b.data()[i], 1e-5f * scale) << what << "[" << i << "]";
  }
}

TEST(CpuThreads, ConvolutionAgreesWithOneAndTwoThreads) {
  auto one = make_cpu_backend(1);
  auto two = make_cpu_backend(2);
  // The wide algorithm (MNIST conv1), im2col (MNIST conv2), im2col with
  // grouped samples, and im2col with stride 2. Columns: C, H = W, K, R = S,
  // stride, pad.
  const int64_t shapes[4][6] = {
      {1, 28, 10, 5, 1, 0}, {10, 12, 20, 5, 1, 0}, {8, 4, 16, 3, 1, 1}, {3, 32, 8, 3, 2, 1}};
  for (const auto& sh : shapes) {
    Conv2dGeometry g;
    g.batch = 64, g.in_channels = sh[0], g.in_h = g.in_w = sh[1], g.out_channels = sh[2];
    g.kernel_h = g.kernel_w = sh[3], g.stride = sh[4], g.pad = sh[5];
    const Tensor x = random_tensor({64, sh[0], sh[1], sh[1]}, 14);
    const Tensor w = random_tensor({sh[2], sh[0], sh[3], sh[3]}, 15);
    const Tensor b = random_tensor({sh[2]}, 17);
    const Tensor dy = random_tensor({64, sh[2], g.out_h(), g.out_w()}, 16);
    Tensor y1(dy.shape()), y2(dy.shape()), dx1(x.shape()), dx2(x.shape());
    Tensor dw1(w.shape()), dw2(w.shape()), db1({sh[2]}), db2({sh[2]});
    one->conv2d_forward(g, x.data(), w.data(), b.data(), y1.data());
    two->conv2d_forward(g, x.data(), w.data(), b.data(), y2.data());
    one->conv2d_backward_data(g, w.data(), dy.data(), dx1.data());
    two->conv2d_backward_data(g, w.data(), dy.data(), dx2.data());
    one->conv2d_backward_filter(g, x.data(), dy.data(), dw1.data(), db1.data());
    two->conv2d_backward_filter(g, x.data(), dy.data(), dw2.data(), db2.data());
    // Each sample's results are computed identically whichever thread runs
    // it; only the weight-gradient reduction order differs.
    SCOPED_TRACE(::testing::Message() << "C " << sh[0] << " H " << sh[1] << " K " << sh[2]);
    EXPECT_TRUE(bitwise_equal(y1, y2));
    EXPECT_TRUE(bitwise_equal(dx1, dx2));
    expect_close_relative(dw1, dw2, "dw");
    expect_close_relative(db1, db2, "db");
  }
}

TEST(CpuThreads, GemmAgreesWithOneAndTwoThreads) {
  auto one = make_cpu_backend(1);
  auto two = make_cpu_backend(2);
  // Large enough to be split: an Eigen-sized product and a small-kernel one.
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{128, 300, 200},
                                std::tuple<int64_t, int64_t, int64_t>{64, 320, 50}}) {
    const Tensor a = random_tensor({m * k}, 18), b = random_tensor({k * n}, 19);
    for (int combo = 0; combo < 4; ++combo) {
      const bool ta = combo & 1, tb = combo & 2;
      Tensor c1({m, n}), c2({m, n});
      one->gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c1.data());
      two->gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c2.data());
      SCOPED_TRACE(::testing::Message()
                   << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb);
      expect_close_relative(c1, c2, "c");
    }
  }
}

TEST(CpuDropout, ProbabilityOneDropsEverything) {
  auto backend = make_cpu_backend(1);
  const DropoutGeometry g = dropout_geometry(2, 3, 1, 1.0f, 0);
  const std::vector<int64_t> ids = {0, 1};
  const float x[6] = {1, 2, 3, 4, 5, 6};
  float y[6], mask[6];
  backend->dropout_forward(g, ids.data(), x, y, mask);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], 0.0f);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(mask[i], 0.0f);
}

TEST(CpuBackend, NameSaysCpuAndThreadCount) {
  EXPECT_EQ(make_cpu_backend(2)->name(), "cpu (2 threads)");
  EXPECT_EQ(make_cpu_backend(1)->name(), "cpu (1 thread)");
  EXPECT_EQ(make_cpu_backend(1)->device(), Device::kCpu);
  EXPECT_EQ(make_cpu_backend(0)->name().rfind("cpu (", 0), 0u);
}

}  // namespace
}  // namespace lockstep::nn
