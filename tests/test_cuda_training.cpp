// The CUDA backend against the CPU backend, continued (see
// test_cuda_backend.cpp for the comparison and the tolerances): log-softmax,
// the losses, the optimizer updates, and a few training steps of mnist_net.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#include "nn/backend.h"

#if LOCKSTEP_HAVE_CUDA

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"
#include "nn/tensor.h"
#include "support/cuda_test_util.h"

namespace lockstep::nn {
namespace {

using namespace cuda_test;  // support/cuda_test_util.h

constexpr Tolerance kSoftmax{1e-6, 1e-5, 0.0};
constexpr Tolerance kUpdate{1e-7, 1e-6, 0.0};

// --- softmax and losses ------------------------------------------------------------------

TEST_F(CudaBackendTest, LogSoftmaxMatchesCpu) {
  for (const auto& [rows, cols, spread] : std::vector<std::tuple<int64_t, int64_t, float>>{
           {16, 10, 1.0f}, {3, 1000, 1.0f}, {64, 10, 50.0f}}) {
    Tensor x = random_tensor({rows, cols}, 21);
    for (float& v : x.span()) v *= spread;  // large logits: the shift must keep it stable
    const Tensor dy = random_tensor({rows, cols}, 22);
    Tensor y({rows, cols}), dx({rows, cols}), yd({rows, cols}, Device::kCuda);
    Tensor dxd({rows, cols}, Device::kCuda);
    const Tensor xd = to_device(x), dyd = to_device(dy);
    cpu().log_softmax_forward(rows, cols, x.data(), y.data());
    gpu().log_softmax_forward(rows, cols, xd.data(), yd.data());
    // y = x - logsumexp: both sides round x and logsumexp at the logits'
    // magnitude, and expf/logf differ by an ulp between libraries, so y near
    // 0 carries two ulps of the largest logit (seen on an H200: 1.9e-6 at
    // logits of about 30).
    float largest = 0.0f;
    for (const float v : x.span()) largest = std::max(largest, std::fabs(v));
    const Tolerance logits_ulps{kSoftmax.abs + 2.0 * FLT_EPSILON * largest, kSoftmax.rel, 0.0};
    expect_close(y, yd, logits_ulps, "log_softmax y");
    cpu().log_softmax_backward(rows, cols, y.data(), dy.data(), dx.data());
    gpu().log_softmax_backward(rows, cols, yd.data(), dyd.data(), dxd.data());
    expect_close(dx, dxd, kSoftmax, "log_softmax dx");
  }
}

void expect_same_stats(const LossStats& cpu, const LossStats& gpu) {
  EXPECT_NEAR(gpu.loss_sum, cpu.loss_sum, 1e-5 * std::abs(cpu.loss_sum) + 1e-6);
  EXPECT_EQ(gpu.correct, cpu.correct);
  EXPECT_EQ(gpu.count, cpu.count);
}

TEST_F(CudaBackendTest, LossesMatchCpu) {
  const int64_t rows = 37, cols = 10;
  Tensor logits = random_tensor({rows, cols}, 23);
  for (float& v : logits.span()) v *= 4.0f;
  logits.data()[3 * cols + 2] = logits.data()[3 * cols + 5] = 9.0f;  // a tie: first max counts
  std::vector<int32_t> labels(rows);
  for (int64_t i = 0; i < rows; ++i) labels[i] = static_cast<int32_t>((i * 3) % cols);
  labels[3] = 2;
  const DeviceLabels labels_d(labels);
  const Tensor logits_d = to_device(logits);
  Tensor logp({rows, cols});
  cpu().log_softmax_forward(rows, cols, logits.data(), logp.data());
  const Tensor logp_d = to_device(logp);
  const float scale = 1.0f / rows;

  for (const bool want_grad : {true, false}) {
    Tensor grad({rows, cols}), grad_d({rows, cols}, Device::kCuda);
    expect_same_stats(cpu().nll_loss(rows, cols, logp.data(), labels.data(), scale,
                                     want_grad ? grad.data() : nullptr),
                      gpu().nll_loss(rows, cols, logp_d.data(), labels_d.data(), scale,
                                     want_grad ? grad_d.data() : nullptr));
    if (want_grad) expect_close(grad, grad_d, kSoftmax, "nll dlogp");
    for (const float smoothing : {0.0f, 0.1f}) {
      expect_same_stats(
          cpu().softmax_cross_entropy(rows, cols, logits.data(), labels.data(), scale,
                                      want_grad ? grad.data() : nullptr, smoothing),
          gpu().softmax_cross_entropy(rows, cols, logits_d.data(), labels_d.data(), scale,
                                      want_grad ? grad_d.data() : nullptr, smoothing));
      if (want_grad) expect_close(grad, grad_d, kSoftmax, "cross-entropy dlogits");
    }
  }
}

TEST_F(CudaBackendTest, LabelOutsideTheClassesIsAnInputError) {
  const int64_t rows = 4, cols = 10;
  const Tensor logits_d = to_device(random_tensor({rows, cols}, 24));
  Tensor grad_d({rows, cols}, Device::kCuda);
  for (const int32_t bad : {-1, 10}) {
    const DeviceLabels labels_d({1, 2, bad, 3});
    try {
      gpu().nll_loss(rows, cols, logits_d.data(), labels_d.data(), 1.0f, grad_d.data());
      ADD_FAILURE() << "nll_loss accepted label " << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("label " + std::to_string(bad) + " of row 2"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(gpu().softmax_cross_entropy(rows, cols, logits_d.data(), labels_d.data(), 1.0f,
                                             nullptr, 0.0f),
                 InputError);
  }
}

// --- optimizer updates ---------------------------------------------------------------------

TEST_F(CudaBackendTest, SgdMatchesCpu) {
  const int64_t n = 10007;
  std::vector<SgdParams> cases(7);
  cases[1].momentum = 0.9f, cases[1].first_step = true;
  cases[2].momentum = 0.9f, cases[2].weight_decay = 5e-4f;
  cases[6].momentum = 0.9f, cases[6].weight_decay = 5e-4f, cases[6].grad_scale = 1.0f / 3;
  cases[3].momentum = 0.9f, cases[3].nesterov = true;
  cases[4].momentum = 0.5f, cases[4].dampening = 0.1f, cases[4].lr = 0.3f;
  cases[5].weight_decay = 1e-2f;
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(::testing::Message() << "case " << c);
    Tensor w = random_tensor({n}, 25), v = random_tensor({n}, 26);
    const Tensor g = random_tensor({n}, 27);
    Tensor wd = to_device(w), vd = to_device(v);
    const Tensor gd = to_device(g);
    for (int step = 0; step < 3; ++step) {
      cpu().sgd_update(n, cases[c], w.data(), g.data(), v.data());
      gpu().sgd_update(n, cases[c], wd.data(), gd.data(), vd.data());
    }
    expect_close(w, wd, kUpdate, "sgd w");
    expect_close(v, vd, kUpdate, "sgd velocity");
  }
}

TEST_F(CudaBackendTest, AdamMatchesCpu) {
  const int64_t n = 10007;
  for (const float weight_decay : {0.0f, 1e-2f}) {
    Tensor w = random_tensor({n}, 28), m({n}), v({n});
    const Tensor g = random_tensor({n}, 29);
    Tensor wd = to_device(w), md = to_device(m), vd = to_device(v);
    const Tensor gd = to_device(g);
    AdamParams p;
    p.weight_decay = weight_decay;
    p.grad_scale = weight_decay == 0.0f ? 1.0f : 0.25f;  // the distributed optimizer's 1 / ranks
    for (p.step = 1; p.step <= 10; ++p.step) {
      cpu().adam_update(n, p, w.data(), g.data(), m.data(), v.data());
      gpu().adam_update(n, p, wd.data(), gd.data(), md.data(), vd.data());
    }
    expect_close(w, wd, kUpdate, "adam w");
    expect_close(m, md, kUpdate, "adam m");
    expect_close(v, vd, kUpdate, "adam v");
  }
}

// --- training -----------------------------------------------------------------------------

struct TrainingRun {
  std::vector<double> losses;
  std::vector<Tensor> parameters;  // host copies after the last step
};

// Three SGD steps (momentum, weight decay) of mnist_net in training mode
// (dropout on) on a fixed random batch.
TrainingRun train_mnist_net(Backend& backend) {
  const int64_t batch = 16;
  const Device device = backend.device();
  auto model = build_model("mnist_net", {}, {1, 28, 28}, 10);
  model->reset_parameters(7, device);
  OptimizerConfig config;
  config.momentum = 0.9f;
  config.weight_decay = 1e-4f;
  auto optimizer = make_optimizer(config, model->parameters(), device);

  const Tensor x_host = random_tensor({batch, 1, 28, 28}, 30);
  Tensor x(x_host.shape(), device);
  x.copy_from(x_host);
  std::vector<int32_t> labels(batch);
  std::vector<int64_t> ids(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % 10), ids[i] = 1000 + i;
  std::unique_ptr<DeviceLabels> labels_d;
  if (device == Device::kCuda) labels_d = std::make_unique<DeviceLabels>(labels);

  TrainingRun run;
  for (int step = 0; step < 3; ++step) {
    ForwardContext ctx;
    ctx.training = true, ctx.seed = 99, ctx.epoch = static_cast<uint64_t>(step);
    ctx.sample_ids = ids.data();
    model->forward(backend, x, ctx);
    const int32_t* l = labels_d ? labels_d->data() : labels.data();
    run.losses.push_back(model->loss(backend, l, 1.0f / batch, true).loss_sum / batch);
    model->backward(backend);
    optimizer->step(backend, 0.05f);
  }
  backend.synchronize();
  for (Parameter* p : model->parameters()) {
    Tensor host(p->value.shape());
    host.copy_from(p->value);
    run.parameters.push_back(std::move(host));
  }
  return run;
}

TEST_F(CudaBackendTest, MnistNetTrainingStepsMatchCpu) {
  const TrainingRun on_cpu = train_mnist_net(cpu());
  const TrainingRun on_gpu = train_mnist_net(gpu());
  ASSERT_EQ(on_cpu.losses.size(), on_gpu.losses.size());
  for (size_t s = 0; s < on_cpu.losses.size(); ++s) {
    EXPECT_NEAR(on_gpu.losses[s], on_cpu.losses[s], 1e-4 * std::abs(on_cpu.losses[s]))
        << "step " << s;
  }
  EXPECT_LT(on_cpu.losses.back(), on_cpu.losses.front());  // it trains: the comparison matters
  ASSERT_EQ(on_cpu.parameters.size(), on_gpu.parameters.size());
  for (size_t i = 0; i < on_cpu.parameters.size(); ++i) {
    const Tensor device_copy = to_device(on_gpu.parameters[i]);
    expect_close(on_cpu.parameters[i], device_copy, Tolerance{0.0, 1e-3, 1e-4},
                 "parameter " + std::to_string(i));
  }
}

// deterministic = true: two runs give bit-identical weights.
TEST_F(CudaBackendTest, DeterministicTrainingRepeatsBitForBit) {
  const TrainingRun first = train_mnist_net(gpu());
  auto other = make_cuda_backend(0, true);  // a fresh context and algorithm cache
  const TrainingRun second = train_mnist_net(*other);
  for (size_t i = 0; i < first.parameters.size(); ++i) {
    const Tensor& a = first.parameters[i];
    const Tensor& b = second.parameters[i];
    ASSERT_EQ(a.numel(), b.numel());
    for (int64_t j = 0; j < a.numel(); ++j) {
      ASSERT_EQ(a.data()[j], b.data()[j]) << "parameter " << i << " element " << j;
    }
  }
  EXPECT_EQ(first.losses, second.losses);
}

}  // namespace
}  // namespace lockstep::nn

#else  // !LOCKSTEP_HAVE_CUDA

TEST(CudaTraining, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("toolkit, cuDNN or NCCL not found, or LOCKSTEP_CUDA=OFF");
}

#endif
