// The CUDA backend against the CPU backend: every op runs on both with the
// same random inputs (copied to device tensors) and the results are compared
// element by element with |gpu - cpu| <= abs + rel * |cpu| + rms * rms(cpu),
// the tolerance stated per op below (after llm.c dev/cuda/common.h
// validate_result). The rms term scales the absolute tolerance with the size
// of the values a reduction produces.
//
//   bit-exact: max-pool (forward, backward), ReLU, dropout (masks too), row
//              bias, column sums, fill, scale, copy
//   1e-4:      convolutions, GEMM (rel 1e-4 and 1e-4 x rms: cuDNN/cuBLAS sum
//              in other orders than the CPU)
//   1e-5:      log-softmax, losses (rel 1e-5; expf/logf differ by an ulp)
//   1e-6:      SGD, Adam, axpy (rel 1e-6: fused multiply-adds may differ)
//
// Without a visible GPU every test here skips and says why (never passes
// vacuously); CudaDevices checks that asking for a device then fails
// cleanly. A build without CUDA compiles one test that skips.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#include "nn/backend.h"

#if LOCKSTEP_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/cuda/cuda_check.h"
#include "nn/tensor.h"
#include "support/cuda_test_util.h"

namespace lockstep::nn {
namespace {

using namespace cuda_test;  // support/cuda_test_util.h

constexpr Tolerance kConv{0.0, 1e-4, 1e-4};
constexpr Tolerance kGemm{0.0, 1e-4, 1e-4};
constexpr Tolerance kUpdate{1e-7, 1e-6, 0.0};

// --- devices ---------------------------------------------------------------------

TEST(CudaDevices, CountAndDescriptionNeverThrow) {
  const int count = cuda_device_count();
  ASSERT_GE(count, 0);
  const std::string description = cuda_devices_description();
  if (count == 0) {
    EXPECT_EQ(description.rfind("CUDA: no device visible", 0), 0u) << description;
    EXPECT_THROW(make_cuda_backend(0, true), InputError);
  } else {
    EXPECT_NE(description.find("cuda:0 "), std::string::npos) << description;
  }
  EXPECT_THROW(make_cuda_backend(count, true), InputError);
  EXPECT_THROW(make_cuda_backend(-1, true), InputError);
}

TEST_F(CudaBackendTest, NamesItsDevice) {
  EXPECT_EQ(gpu().device(), Device::kCuda);
  EXPECT_EQ(gpu().name().rfind("cuda:0 (", 0), 0u) << gpu().name();
}

// A failed runtime call reported by CUDA_CHECK is consumed there: the next
// kernel launch's check does not report it again (in the NCCL tests a failed
// cudaSetDevice on one rank used to fail that rank's next launch only).
TEST_F(CudaBackendTest, AFailureReportedOnceIsNotReportedByTheNextLaunch) {
  EXPECT_THROW(CUDA_CHECK(cudaSetDevice(1 << 20)), LibraryError);
  const int64_t n = 1000;
  Tensor x({n}, Device::kCuda);
  EXPECT_NO_THROW(gpu().fill(n, 3.0f, x.data()));
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_EQ(cuda_test::to_host(x).data()[n - 1], 3.0f);
}

// Uploads through the pinned staging ring: the host buffer is reused (and
// overwritten) right after each call, more uploads are queued than the ring
// has buffers, behind queued backend work, and each lands intact.
TEST_F(CudaBackendTest, StagedUploadsLandInOrderAndFreeTheHostBuffer) {
  const int64_t n = int64_t{1} << 20;
  std::vector<Tensor> targets;
  std::vector<float> host(static_cast<size_t>(n));
  for (int i = 0; i < 9; ++i) {
    targets.emplace_back(Shape{n - i}, Device::kCuda);
    gpu().fill(n - i, -1.0f, targets.back().data());
    for (int64_t j = 0; j < n - i; ++j)
      host[static_cast<size_t>(j)] = static_cast<float>(i * n + j);
    cuda_upload(gpu(), host.data(), targets.back().data(),
                static_cast<size_t>(n - i) * sizeof(float));
    std::fill(host.begin(), host.end(), 0.0f);  // at once: the upload took its own copy
  }
  for (int i = 0; i < 9; ++i) {
    const Tensor got = cuda_test::to_host(targets[static_cast<size_t>(i)]);
    for (int64_t j = 0; j < n - i; j += 997) {
      ASSERT_EQ(got.data()[j], static_cast<float>(i * n + j)) << "upload " << i << " element " << j;
    }
    ASSERT_EQ(got.data()[n - i - 1], static_cast<float>(i * n + n - i - 1)) << "upload " << i;
  }
}

// Backend work and Tensor copies (legacy default stream) are ordered without
// an explicit synchronize(): the backend's stream is a blocking stream.
TEST_F(CudaBackendTest, TensorCopiesSeeQueuedResults) {
  const int64_t n = int64_t{1} << 24;
  Tensor x({n}, Device::kCuda);
  for (int round = 1; round <= 3; ++round) {
    gpu().fill(n, static_cast<float>(round), x.data());
    gpu().scale(n, 2.0f, x.data());
    Tensor host({n});
    host.copy_from(x);  // no synchronize() on purpose
    EXPECT_EQ(host.data()[0], 2.0f * round);
    EXPECT_EQ(host.data()[n - 1], 2.0f * round);
  }
}

// --- convolution --------------------------------------------------------------------

Conv2dGeometry conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                    int64_t stride, int64_t pad) {
  Conv2dGeometry g;
  g.batch = n, g.in_channels = c, g.in_h = h, g.in_w = w;
  g.out_channels = k, g.kernel_h = r, g.kernel_w = s, g.stride = stride, g.pad = pad;
  return g;
}

class CudaConvTest : public CudaBackendTest,
                     public ::testing::WithParamInterface<Conv2dGeometry> {};

TEST_P(CudaConvTest, ForwardAndBackwardMatchCpu) {
  for (const bool bias : {true, false}) {
    cuda_test::expect_conv_matches(cpu(), gpu(), GetParam(), bias, kConv, kConv);
  }
}

INSTANTIATE_TEST_SUITE_P(
    CudaShapes, CudaConvTest,
    ::testing::Values(conv(8, 1, 28, 28, 10, 5, 5, 1, 0),   // mnist_net conv1
                      conv(8, 10, 12, 12, 20, 5, 5, 1, 0),  // mnist_net conv2
                      conv(4, 3, 32, 32, 64, 3, 3, 2, 1),   // alexnet_cifar features.0
                      conv(4, 64, 8, 8, 192, 3, 3, 1, 1),   // features.3
                      conv(4, 192, 4, 4, 384, 3, 3, 1, 1),  // features.6
                      conv(4, 384, 4, 4, 256, 3, 3, 1, 1),  // features.8
                      conv(4, 256, 4, 4, 256, 3, 3, 1, 1),  // features.10
                      conv(3, 3, 7, 9, 5, 3, 3, 2, 1),      // odd sizes, stride 2, pad 1
                      conv(1, 2, 6, 5, 3, 3, 2, 1, 1),      // rectangular kernel
                      conv(2, 4, 5, 5, 3, 5, 5, 1, 0),      // kernel = image: 1x1 output
                      conv(5, 3, 11, 10, 7, 1, 1, 3, 0)),   // 1x1 kernel, stride 3
    [](const auto& case_info) { return testing::geometry_name(case_info.param); });

// deterministic = false (algorithms measured with cudnnFind), and one backend
// going back and forth between shapes (a smaller last batch, then the next
// epoch): each shape keeps its own cached descriptors and algorithms.
TEST_F(CudaBackendTest, ConvWithMeasuredAlgorithmsAndAlternatingShapesMatchesCpu) {
  auto measured = make_cuda_backend(0, false);
  const Conv2dGeometry full = conv(8, 10, 12, 12, 20, 5, 5, 1, 0),
                       last = conv(3, 10, 12, 12, 20, 5, 5, 1, 0);
  for (const Conv2dGeometry& g : {full, last, full}) {
    SCOPED_TRACE(::testing::Message() << "batch " << g.batch);
    const Shape xs{g.batch, g.in_channels, g.in_h, g.in_w};
    const Shape ws{g.out_channels, g.in_channels, g.kernel_h, g.kernel_w};
    const Shape ys{g.batch, g.out_channels, g.out_h(), g.out_w()};
    const Tensor x = random_tensor(xs, 31), w = random_tensor(ws, 32), dy = random_tensor(ys, 33);
    const Tensor xd = to_device(x), wd = to_device(w), dyd = to_device(dy);
    Tensor y(ys), yd(ys, Device::kCuda), dx(xs), dxd(xs, Device::kCuda);
    Tensor dw(ws), dwd(ws, Device::kCuda);
    cpu().conv2d_forward(g, x.data(), w.data(), nullptr, y.data());
    measured->conv2d_forward(g, xd.data(), wd.data(), nullptr, yd.data());
    expect_close(y, yd, kConv, "y");
    cpu().conv2d_backward_data(g, w.data(), dy.data(), dx.data());
    measured->conv2d_backward_data(g, wd.data(), dyd.data(), dxd.data());
    expect_close(dx, dxd, kConv, "dx");
    cpu().conv2d_backward_filter(g, x.data(), dy.data(), dw.data(), nullptr);
    measured->conv2d_backward_filter(g, xd.data(), dyd.data(), dwd.data(), nullptr);
    expect_close(dw, dwd, kConv, "dw");
  }
}

// --- pooling ------------------------------------------------------------------------

Pool2dGeometry pool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kernel, int64_t stride) {
  Pool2dGeometry g;
  g.batch = n, g.channels = c, g.in_h = h, g.in_w = w, g.kernel = kernel, g.stride = stride;
  return g;
}

void check_pool(Backend& cpu, Backend& gpu, const Pool2dGeometry& g, const Tensor& x) {
  const Shape ys{g.batch, g.channels, g.out_h(), g.out_w()};
  const Tensor dy = random_tensor(ys, 7);
  const Tensor xd = to_device(x), dyd = to_device(dy);
  Tensor y(ys), yd(ys, Device::kCuda);
  cpu.maxpool2d_forward(g, x.data(), y.data());
  gpu.maxpool2d_forward(g, xd.data(), yd.data());
  expect_close(y, yd, kExact, "y");
  Tensor dx(x.shape()), dxd(x.shape(), Device::kCuda);
  cpu.maxpool2d_backward(g, x.data(), y.data(), dy.data(), dx.data());
  gpu.maxpool2d_backward(g, xd.data(), yd.data(), dyd.data(), dxd.data());
  expect_close(dx, dxd, kExact, "dx");
}

class CudaPoolTest : public CudaBackendTest,
                     public ::testing::WithParamInterface<Pool2dGeometry> {};

TEST_P(CudaPoolTest, MatchesCpuExactly) {
  const Pool2dGeometry g = GetParam();
  check_pool(cpu(), gpu(), g, random_tensor({g.batch, g.channels, g.in_h, g.in_w}, 6));
}

// Ties (small integers) and NaN: the first maximum wins, as on the CPU.
TEST_P(CudaPoolTest, TiesAndNanFollowTheCpu) {
  const Pool2dGeometry g = GetParam();
  Tensor x({g.batch, g.channels, g.in_h, g.in_w});
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>((i * 7) % 3);
  x.data()[x.numel() / 2] = std::nanf("");
  check_pool(cpu(), gpu(), g, x);
}

INSTANTIATE_TEST_SUITE_P(CudaShapes, CudaPoolTest,
                         ::testing::Values(pool(8, 10, 24, 24, 2, 2),  // mnist_net pool1
                                           pool(8, 20, 8, 8, 2, 2),    // mnist_net pool2
                                           pool(4, 64, 16, 16, 2, 2),  // alexnet_cifar pools
                                           pool(4, 192, 8, 8, 2, 2), pool(4, 256, 4, 4, 2, 2),
                                           pool(3, 2, 7, 5, 2, 2),   // odd sizes
                                           pool(2, 3, 9, 9, 3, 2),   // overlapping windows
                                           pool(2, 2, 6, 7, 3, 1)),  // stride 1
                         [](const auto& case_info) {
                           return testing::geometry_name(case_info.param);
                         });

// --- activation and dropout ------------------------------------------------------------

TEST_F(CudaBackendTest, ReluMatchesCpuExactly) {
  Tensor x = random_tensor({4099}, 8);
  x.data()[5] = 0.0f;
  x.data()[6] = -0.0f;
  x.data()[7] = std::nanf("");
  const Tensor dy = random_tensor({4099}, 9);
  Tensor y({4099}), dx({4099});
  cpu().relu_forward(x.numel(), x.data(), y.data());
  cpu().relu_backward(x.numel(), y.data(), dy.data(), dx.data());

  Tensor yd = to_device(x), dxd = to_device(dy);  // in place, as layers may run it
  gpu().relu_forward(x.numel(), yd.data(), yd.data());
  gpu().relu_backward(x.numel(), yd.data(), dxd.data(), dxd.data());
  expect_close(y, yd, kExact, "relu y");
  expect_close(dx, dxd, kExact, "relu dx");
}

TEST_F(CudaBackendTest, DropoutMasksAreBitIdenticalToCpu) {
  // Ordinary dropout (S = 1) and channel-wise dropout (S = H * W).
  for (const int64_t spatial : {int64_t{1}, int64_t{36}}) {
    DropoutGeometry g;
    g.batch = 7, g.channels = 50, g.spatial = spatial, g.p = 0.3f;
    g.seed = 12345, g.stream = 678;
    const std::vector<int64_t> ids = {5, 123456789, 0, 42, 59999, 7, 31337};
    const Shape shape{g.batch, g.channels, g.spatial};
    const Tensor x = random_tensor(shape, 10), dy = random_tensor(shape, 11);
    Tensor y(shape), mask({g.batch, g.channels}), dx(shape);
    cpu().dropout_forward(g, ids.data(), x.data(), y.data(), mask.data());
    cpu().dropout_backward(g, mask.data(), dy.data(), dx.data());

    Tensor yd = to_device(x), maskd({g.batch, g.channels}, Device::kCuda), dxd = to_device(dy);
    gpu().dropout_forward(g, ids.data(), yd.data(), yd.data(), maskd.data());  // in place
    gpu().dropout_backward(g, maskd.data(), dxd.data(), dxd.data());
    expect_close(mask, maskd, kExact, "mask");
    expect_close(y, yd, kExact, "dropout y");
    expect_close(dx, dxd, kExact, "dropout dx");
    int kept = 0;
    for (float m : mask.span()) kept += m != 0.0f;
    EXPECT_GT(kept, 0);  // the masks compared are not trivial
    EXPECT_LT(kept, mask.numel());
  }
}

// --- dense ---------------------------------------------------------------------------

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

TEST_F(CudaBackendTest, GemmMatchesCpu) {
  const std::vector<GemmCase> cases = {
      {false, false, 7, 5, 3, 1.0f, 0.0f},
      {true, false, 7, 5, 3, 1.0f, 0.0f},
      {false, true, 7, 5, 3, 0.5f, 1.0f},
      {true, true, 7, 5, 3, 2.0f, 0.5f},
      {false, true, 16, 50, 320, 1.0f, 0.0f},     // mnist_net fc1 forward: x * W^T
      {true, false, 50, 320, 16, 1.0f, 0.0f},     // fc1 weight gradient: dy^T * x
      {false, false, 16, 320, 50, 1.0f, 0.0f},    // fc1 input gradient: dy * W
      {false, true, 16, 4096, 1024, 1.0f, 0.0f},  // alexnet_cifar classifier.1
      {true, false, 4096, 1024, 16, 1.0f, 0.0f},
      {false, false, 3, 4, 0, 1.0f, 0.5f},  // empty product: C = beta * C
  };
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "ta=" << c.ta << " tb=" << c.tb << " m=" << c.m
                                      << " n=" << c.n << " k=" << c.k << " beta=" << c.beta);
    const Tensor a = random_tensor({c.ta ? c.k : c.m, c.ta ? c.m : c.k}, 12);
    const Tensor b = random_tensor({c.tb ? c.n : c.k, c.tb ? c.k : c.n}, 13);
    Tensor cc = random_tensor({c.m, c.n}, 14);
    if (c.beta == 0.0f) {  // beta = 0 must overwrite, even NaN
      for (float& v : cc.span()) v = std::nanf("");
    }
    const Tensor ad = to_device(a), bd = to_device(b);
    Tensor cd = to_device(cc);
    cpu().gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), b.data(), c.beta, cc.data());
    gpu().gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, ad.data(), bd.data(), c.beta, cd.data());
    expect_close(cc, cd, kGemm, "C");
  }
}

TEST_F(CudaBackendTest, RowBiasAndColumnSumsMatchCpuExactly) {
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{16, 50}, {16, 4096}, {3, 7}, {1000, 10}}) {
    const Tensor bias = random_tensor({cols}, 15), dy = random_tensor({rows, cols}, 16);
    Tensor y = random_tensor({rows, cols}, 17), db({cols});
    Tensor yd = to_device(y), dbd({cols}, Device::kCuda);
    const Tensor biasd = to_device(bias), dyd = to_device(dy);
    cpu().add_row_bias(rows, cols, bias.data(), y.data());
    gpu().add_row_bias(rows, cols, biasd.data(), yd.data());
    expect_close(y, yd, kExact, "y + bias");
    cpu().sum_rows(rows, cols, dy.data(), db.data());
    gpu().sum_rows(rows, cols, dyd.data(), dbd.data());
    expect_close(db, dbd, kExact, "db");
  }
}

// --- element-wise helpers --------------------------------------------------------------

TEST_F(CudaBackendTest, VectorHelpersMatchCpu) {
  const int64_t n = 70001;
  const Tensor x = random_tensor({n}, 18);
  Tensor y = random_tensor({n}, 19);
  const Tensor xd = to_device(x);
  Tensor yd = to_device(y);
  cpu().axpy(n, -0.75f, x.data(), y.data());
  gpu().axpy(n, -0.75f, xd.data(), yd.data());
  expect_close(y, yd, kUpdate, "axpy");
  cpu().scale(n, 1.5f, y.data());
  gpu().scale(n, 1.5f, yd.data());
  expect_close(y, yd, kUpdate, "axpy then scale");

  Tensor z = random_tensor({n}, 20), zd = to_device(z);
  cpu().scale(n, 3.0f, z.data());
  gpu().scale(n, 3.0f, zd.data());
  expect_close(z, zd, kExact, "scale");
  cpu().copy(n, x.data(), z.data());
  gpu().copy(n, xd.data(), zd.data());
  expect_close(z, zd, kExact, "copy");
  cpu().fill(n, 2.5f, z.data());
  gpu().fill(n, 2.5f, zd.data());
  expect_close(z, zd, kExact, "fill");
}

// The scaler's check: one device flag over several arrays finds each kind
// of non-finite value at the first, a middle and the last element, and
// nothing in arrays of the largest finite floats (or in an empty one).
TEST_F(CudaBackendTest, AnyNonFiniteAgreesWithCpu) {
  const float big = std::numeric_limits<float>::max();
  Tensor a({3}), b({100003});
  for (float& v : a.span()) v = -big;
  for (float& v : b.span()) v = big;
  for (const float bad : {std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::nanf("")}) {
    for (const int64_t where : {int64_t{-1}, int64_t{0}, int64_t{65536}, int64_t{100002}}) {
      Tensor bb = b.clone();
      if (where >= 0) bb.data()[where] = bad;
      const Tensor ad = to_device(a), bd = to_device(bb);
      const std::vector<ConstFloats> host{{a.data(), 3}, {nullptr, 0}, {bb.data(), bb.numel()}};
      const std::vector<ConstFloats> dev{{ad.data(), 3}, {nullptr, 0}, {bd.data(), bd.numel()}};
      EXPECT_EQ(gpu().any_non_finite(dev), where >= 0) << bad << " at " << where;
      EXPECT_EQ(gpu().any_non_finite(dev), cpu().any_non_finite(host)) << bad << " at " << where;
    }
  }
}

}  // namespace
}  // namespace lockstep::nn

#else  // !LOCKSTEP_HAVE_CUDA

TEST(CudaBackend, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("toolkit, cuDNN or NCCL not found, or LOCKSTEP_CUDA=OFF");
}

#endif
