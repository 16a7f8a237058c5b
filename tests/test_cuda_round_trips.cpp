// The CUDA backend's device-side training ops against the CPU's, with the
// host traffic they make (Backend::host_traffic): the accumulating losses
// (LossTotals in device memory) and BatchNorm's training passes queue their
// work and neither wait for the device nor copy anything to the host; the
// one read-back of the totals is one wait and one read; every op marked
// [host read|wait|write] in nn/backend.h counts what its mark says.
//
//   exact: counts (rows, correct, batches, bad labels), the NLL loss sum
//   1e-5:  cross-entropy sums, gradients, BatchNorm (rel 1e-5; the device
//          reduces in another order)
//
// Without a visible GPU every test here skips and says why.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#if LOCKSTEP_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/cuda/cuda_device_memory.h"
#include "nn/layers/batch_norm2d.h"
#include "nn/loss_totals.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"
#include "nn/tensor.h"
#include "support/counting_backend.h"
#include "support/cuda_test_util.h"

namespace lockstep::nn {
namespace {

using namespace cuda_test;  // support/cuda_test_util.h

constexpr Tolerance kClose{1e-6, 1e-5, 0.0};

LossTotals* totals_of(Tensor& t) {
  return reinterpret_cast<LossTotals*>(t.data());
}

// Three batches of `rows` x 10 through one loss kind, with a label out of
// range in the second batch; the totals and the gradient of the last batch
// on both backends, and no host traffic on the GPU until the read-back.
void expect_accumulation_matches(Backend& cpu, Backend& gpu, bool nll) {
  const int64_t rows = 37, cols = 10;
  Tensor totals_cpu({kLossTotalsFloats}), totals_gpu({kLossTotalsFloats}, Device::kCuda);
  cpu.fill(kLossTotalsFloats, 0.0f, totals_cpu.data());
  gpu.fill(kLossTotalsFloats, 0.0f, totals_gpu.data());
  Tensor dx({rows, cols}), dx_gpu({rows, cols}, Device::kCuda);
  const HostTraffic before = gpu.host_traffic();
  for (uint64_t batch = 0; batch < 3; ++batch) {
    Tensor x = random_tensor({rows, cols}, 40 + batch);
    if (nll) cpu.log_softmax_forward(rows, cols, x.data(), x.data());
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < rows; ++i) labels.push_back(static_cast<int32_t>((i * 7) % cols));
    if (batch == 1) labels[5] = -1, labels[9] = static_cast<int32_t>(cols);
    const Tensor xd = to_device(x);
    const DeviceLabels ld(labels);
    if (nll) {
      cpu.nll_loss_accumulate(rows, cols, x.data(), labels.data(), 0.5f, dx.data(),
                              totals_of(totals_cpu));
      gpu.nll_loss_accumulate(rows, cols, xd.data(), ld.data(), 0.5f, dx_gpu.data(),
                              totals_of(totals_gpu));
    } else {
      cpu.softmax_cross_entropy_accumulate(rows, cols, x.data(), labels.data(), 0.5f, dx.data(),
                                           0.1f, totals_of(totals_cpu));
      gpu.softmax_cross_entropy_accumulate(rows, cols, xd.data(), ld.data(), 0.5f, dx_gpu.data(),
                                           0.1f, totals_of(totals_gpu));
    }
    expect_close(dx, dx_gpu, kClose, nll ? "dlogp" : "dlogits");
  }
  const HostTraffic queued = gpu.host_traffic() - before;
  EXPECT_EQ(queued.waits, 0);
  EXPECT_EQ(queued.reads, 0);
  LossTotals got;
  gpu.download(totals_gpu.data(), &got, sizeof(got));
  EXPECT_EQ(gpu.host_traffic() - before, (HostTraffic{.waits = 1, .reads = 1}));
  const LossTotals& want = *totals_of(totals_cpu);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.count, 3 * rows - 2);
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_EQ(got.batches, 3.0);
  EXPECT_EQ(got.bad_labels, 2.0);
  EXPECT_EQ(got.first_bad_label, 2.0);
  EXPECT_EQ(got.first_non_finite, 0.0);
  if (nll) {
    EXPECT_EQ(got.loss_sum, want.loss_sum);
  } else {
    EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * std::abs(want.loss_sum));
  }
}

TEST_F(CudaBackendTest, AccumulatedLossesMatchCpuWithoutAHostWait) {
  expect_accumulation_matches(cpu(), gpu(), true);
  expect_accumulation_matches(cpu(), gpu(), false);
}

TEST_F(CudaBackendTest, AccumulatedNonFiniteLossIsRecordedWithItsBatch) {
  const int64_t rows = 4, cols = 3;
  Tensor totals({kLossTotalsFloats}, Device::kCuda);
  gpu().fill(kLossTotalsFloats, 0.0f, totals.data());
  const DeviceLabels labels({0, 1, 2, 0});
  for (int batch = 0; batch < 3; ++batch) {
    Tensor x = random_tensor({rows, cols}, 7);
    if (batch >= 1) x.data()[4] = std::numeric_limits<float>::infinity();
    const Tensor xd = to_device(x);
    gpu().softmax_cross_entropy_accumulate(rows, cols, xd.data(), labels.data(), 1.0f, nullptr,
                                           0.0f, totals_of(totals));
  }
  LossTotals got;
  gpu().download(totals.data(), &got, sizeof(got));
  EXPECT_EQ(got.first_non_finite, 2.0);
  EXPECT_FALSE(std::isfinite(got.non_finite_loss));
}

BatchNormTrainState train_state(const Tensor& weight, const Tensor& bias, Tensor& running_mean,
                                Tensor& running_var, Tensor& batches, Tensor& stats, Tensor& coef) {
  return {.weight = weight.data(),
          .bias = bias.data(),
          .running_mean = running_mean.data(),
          .running_var = running_var.data(),
          .num_batches_tracked = batches.data(),
          .stats = reinterpret_cast<double*>(stats.data()),
          .coef = coef.data()};
}

// BatchNorm's training passes (fused ReLU, then without) on both backends
// from the same state: outputs, gradients and running statistics agree,
// and the GPU makes no host traffic.
TEST_F(CudaBackendTest, BatchNormTrainingOpsMatchCpuWithoutAHostWait) {
  const BatchNormGeometry g{4, 3, 25};
  const Shape xs{4, 3, 5, 5};
  for (const bool relu : {true, false}) {
    const Tensor x = random_tensor(xs, 1), dy = random_tensor(xs, 2);
    Tensor w = random_tensor({3}, 3), b = random_tensor({3}, 4);
    Tensor rm = random_tensor({3}, 5), rv({3}), nbt({1}), stats({12}), coef({5, 3});
    for (float& v : rv.span()) v = 1.5f;
    const Tensor xd = to_device(x), dyd = to_device(dy), wd = to_device(w), bd = to_device(b);
    Tensor rmd = to_device(rm), rvd = to_device(rv), nbtd = to_device(nbt);
    Tensor statsd({12}, Device::kCuda), coefd({5, 3}, Device::kCuda);
    const BatchNormTrainState sc = train_state(w, b, rm, rv, nbt, stats, coef);
    const BatchNormTrainState sg = train_state(wd, bd, rmd, rvd, nbtd, statsd, coefd);
    Tensor y(xs), yd(xs, Device::kCuda), dx(xs), dxd(xs, Device::kCuda);
    Tensor dw({3}), db({3}), dwd({3}, Device::kCuda), dbd({3}, Device::kCuda);
    const HostTraffic before = gpu().host_traffic();
    cpu().batchnorm_train_forward(g, sc, x.data(), relu, y.data());
    gpu().batchnorm_train_forward(g, sg, xd.data(), relu, yd.data());
    const float* masked_cpu = relu ? y.data() : nullptr;
    const float* masked_gpu = relu ? yd.data() : nullptr;
    cpu().batchnorm_train_backward(g, sc, x.data(), masked_cpu, dy.data(), dw.data(), db.data(),
                                   dx.data());
    gpu().batchnorm_train_backward(g, sg, xd.data(), masked_gpu, dyd.data(), dwd.data(), dbd.data(),
                                   dxd.data());
    const HostTraffic queued = gpu().host_traffic() - before;
    EXPECT_EQ(queued.waits, 0);
    EXPECT_EQ(queued.reads, 0);
    expect_close(y, yd, kClose, "y");
    expect_close(dx, dxd, kClose, "dx");
    expect_close(dw, dwd, kClose, "dweight");
    expect_close(db, dbd, kClose, "dbias");
    expect_close(rm, rmd, kClose, "running_mean");
    expect_close(rv, rvd, kClose, "running_var");
    expect_close(nbt, nbtd, kExact, "num_batches_tracked");
  }
}

// Four SGD steps of a zoo model on the GPU as the trainer runs them (batch
// uploaded through the backend, loss accumulated on the device, backward,
// optimizer step): from the second step on, no host wait and no read; the
// loss totals come back in one read at the end and hold every sample. The
// third step is queued behind long work and the host must get through it
// with that work still running: a wait the backend does not count (an
// implicit synchronisation of cudaMalloc, cudaFree or a pinned allocation)
// would let the stream drain first.
void expect_steady_steps_read_nothing(Backend& gpu, const std::string& name) {
  const int64_t batch = 16;
  auto model = build_model(name, {}, {1, 28, 28}, 10);
  model->reset_parameters(7, Device::kCuda);
  OptimizerConfig config;
  config.momentum = 0.9f;
  auto optimizer = make_optimizer(config, model->parameters(), Device::kCuda);
  const Tensor x_host = random_tensor({batch, 1, 28, 28}, 30);
  std::vector<int32_t> labels(batch);
  std::vector<int64_t> ids(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % 10), ids[i] = 1000 + i;
  Tensor x(x_host.shape(), Device::kCuda), l({batch}, Device::kCuda);
  Tensor totals({kLossTotalsFloats}, Device::kCuda);
  gpu.fill(kLossTotalsFloats, 0.0f, totals.data());
  const int64_t m = int64_t{4096} * 4096;
  Tensor ga({m}, Device::kCuda), gb({m}, Device::kCuda), gc({m}, Device::kCuda);
  gpu.fill(m, 1.0f / 4096.0f, ga.data());
  gpu.fill(m, 1.0f, gb.data());
  HostTraffic last = gpu.host_traffic();
  for (int step = 0; step < 4; ++step) {
    if (step == 2) queue_long_work(gpu, ga, gb, gc);
    gpu.upload(x_host.data(), x.data(), static_cast<size_t>(x.numel()) * sizeof(float));
    gpu.upload(labels.data(), l.data(), labels.size() * sizeof(int32_t));
    ForwardContext ctx;
    ctx.training = true, ctx.seed = 99, ctx.epoch = 0, ctx.sample_ids = ids.data();
    model->forward(gpu, x, ctx);
    model->accumulate_loss(gpu, reinterpret_cast<const int32_t*>(l.data()), 1.0f / batch,
                           totals_of(totals));
    model->backward(gpu);
    optimizer->step(gpu, 0.05f);
    if (step == 2) {
      EXPECT_EQ(cudaStreamQuery(static_cast<cudaStream_t>(gpu.native_stream())), cudaErrorNotReady)
          << name << ": the host waited for the stream inside a steady step";
    }
    const HostTraffic now = gpu.host_traffic(), d = now - last;
    last = now;
    if (step == 0) continue;  // the first step chooses algorithms and grows buffers
    EXPECT_EQ(d.waits, 0) << name << " step " << step + 1;
    EXPECT_EQ(d.reads, 0) << name << " step " << step + 1;
    if (d.throttles != 0)
      std::printf("%s step %d: %lld upload stalls\n", name.c_str(), step + 1,
                  static_cast<long long>(d.throttles));
  }
  LossTotals got;
  gpu.download(totals.data(), &got, sizeof(got));
  EXPECT_EQ(got.count, 4.0 * batch) << name;
  EXPECT_EQ(got.batches, 4.0) << name;
  EXPECT_EQ(got.first_non_finite, 0.0) << name;
}

TEST_F(CudaBackendTest, SteadyTrainingStepsWaitForNothingAndReadNothing) {
  expect_steady_steps_read_nothing(gpu(), "mnist_net");
  expect_steady_steps_read_nothing(gpu(), "resnet20");
}

// The CUDA backend's own counts (Backend::host_traffic) of each marked op
// are what its mark in nn/backend.h says (the table the counting backend
// uses on the CPU), and an unmarked op makes none.
TEST_F(CudaBackendTest, EachMarkedOpMakesTheTrafficItsMarkSays) {
  const BatchNormGeometry g{2, 3, 4};
  const Tensor x = to_device(random_tensor({2, 3, 2, 2}, 1));
  const Tensor coef = to_device(random_tensor({5, 3}, 2));
  Tensor y({2, 3, 2, 2}, Device::kCuda), mask({2, 3}, Device::kCuda);
  Tensor logits = to_device(random_tensor({2, 3}, 3));
  const DeviceLabels labels({0, 2});
  std::vector<double> sums(6);
  std::vector<float> host(4);
  const std::vector<int64_t> ids = {5, 9};
  const ConstFloats arrays[] = {{x.data(), x.numel()}};
  const auto run = [&](const std::string& op) {
    if (op == "batchnorm_stats") {
      gpu().batchnorm_stats(g, x.data(), sums.data(), sums.data() + 3);
    } else if (op == "batchnorm_backward_sums") {
      gpu().batchnorm_backward_sums(g, x.data(), nullptr, x.data(), coef.data(), sums.data(),
                                    sums.data() + 3);
    } else if (op == "nll_loss") {
      gpu().nll_loss(2, 3, logits.data(), labels.data(), 1.0f, nullptr);
    } else if (op == "softmax_cross_entropy") {
      gpu().softmax_cross_entropy(2, 3, logits.data(), labels.data(), 1.0f, nullptr, 0.0f);
    } else if (op == "any_non_finite") {
      gpu().any_non_finite(arrays);
    } else if (op == "download") {
      gpu().download(x.data(), host.data(), sizeof(float) * 4);
    } else if (op == "synchronize") {
      gpu().synchronize();
    } else if (op == "dropout_forward") {
      gpu().dropout_forward({.batch = 2, .channels = 3, .spatial = 4}, ids.data(), x.data(),
                            y.data(), mask.data());
    } else if (op == "upload") {
      gpu().upload(host.data(), y.data(), sizeof(float) * 4);
    } else {
      ADD_FAILURE() << "no call for the marked op " << op;
    }
  };
  for (const auto& [op, mark] : testing::CountingBackend::marks()) {
    const HostTraffic before = gpu().host_traffic();
    run(op);
    const HostTraffic d = gpu().host_traffic() - before;
    EXPECT_EQ(d.waits, mark.waits) << op;
    EXPECT_EQ(d.reads, mark.reads) << op;
    EXPECT_EQ(d.writes, mark.writes) << op;
  }
  const HostTraffic before = gpu().host_traffic();
  gpu().batchnorm_apply(g, x.data(), coef.data(), true, y.data());
  gpu().relu_forward(x.numel(), x.data(), y.data());
  gpu().fill(4, 0.0f, y.data());
  EXPECT_EQ(gpu().host_traffic() - before, HostTraffic{});
}

// Tensor copies between host and device memory count in
// cuda_tensor_copy_traffic() (each a wait and a read or a write); a
// BatchNorm evaluation batch makes none, and no backend traffic either (its
// coefficients are computed on the device).
TEST_F(CudaBackendTest, TensorCopiesCountAndBatchNormEvaluationMakesNone) {
  Tensor host({8}), device({8}, Device::kCuda);
  HostTraffic before = cuda_tensor_copy_traffic();
  device.copy_from(host);
  EXPECT_EQ(cuda_tensor_copy_traffic() - before, (HostTraffic{.waits = 1, .writes = 1}));
  before = cuda_tensor_copy_traffic();
  host.copy_from(device);
  EXPECT_EQ(cuda_tensor_copy_traffic() - before, (HostTraffic{.waits = 1, .reads = 1}));
  BatchNorm2d bn(3, /*relu=*/true);
  bn.set_name("bn");
  bn.reset_parameters(1, Device::kCuda);
  Tensor x({2, 3, 4, 4}, Device::kCuda), y({2, 3, 4, 4}, Device::kCuda);
  before = cuda_tensor_copy_traffic();
  const HostTraffic backend_before = gpu().host_traffic();
  for (int batch = 0; batch < 3; ++batch) bn.forward(gpu(), x, y, {.training = false});
  EXPECT_EQ(cuda_tensor_copy_traffic() - before, HostTraffic{});
  EXPECT_EQ(gpu().host_traffic() - backend_before, HostTraffic{});
}

}  // namespace
}  // namespace lockstep::nn

#else  // !LOCKSTEP_HAVE_CUDA

TEST(CudaRoundTrips, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("toolkit, cuDNN or NCCL not found, or LOCKSTEP_CUDA=OFF");
}

#endif
