// The CUDA backend at each precision (nn/cuda/math_types.h), typed over
// fp32, bf16 and fp16: convolutions (forward, backward data and filter, with
// bias) and GEMMs against the float32 CPU backend, with tolerances stated
// from each format's rounding of the inputs (unit roundoff u = 2^-8 for bf16,
// 2^-11 for fp16): each product carries a relative error of up to 2u, and a
// sum of k such products an error of about 2u * sqrt(k) * rms(product),
// against an output of rms about sqrt(k) * rms(product); so |diff| stays
// within a few times 2u * rms(output), plus u * |output| where the result
// itself is rounded to 16 bits (dw, dx). fp32 keeps the backend test's 1e-4.
// Also: the loss's single host wait still rejects a bad label, and a short
// training run's loss at each precision tracks the fp32 run's.
//
// Without a visible GPU every test skips and says why. A build without CUDA
// compiles one test that skips.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#include "nn/backend.h"

#if LOCKSTEP_HAVE_CUDA

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/cuda/device_context.h"
#include "nn/cuda/math_types.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"
#include "support/band_batch.h"
#include "support/cuda_test_util.h"

namespace lockstep::nn {
namespace {

using nn::Precision;
using namespace cuda_test;  // support/cuda_test_util.h

template <Precision P>
using At = std::integral_constant<Precision, P>;

template <typename T>
class CudaPrecisionTest : public ::testing::Test {
 protected:
  static constexpr Precision kPrecision = T::value;
  void SetUp() override {
    if (cuda_device_count() == 0) {
      LOCKSTEP_SKIP_NO_DEVICE(cuda_devices_description() << ": the " << nn::to_string(kPrecision)
                                                         << " CUDA path is not tested");
    }
    cpu_ = make_cpu_backend({.threads = 2, .winograd = false});  // as cuda_test_util.h
    gpu_ = make_cuda_backend(0, true, kPrecision);
  }
  static Tolerance tolerance() {
    switch (kPrecision) {
      case Precision::kBf16:
        return {0.0, 4e-3, 2e-2};
      case Precision::kFp16:
        return {0.0, 5e-4, 3e-3};
      case Precision::kFp32:
        break;
    }
    return {0.0, 1e-4, 1e-4};
  }
  std::unique_ptr<Backend> cpu_, gpu_;
};

using Precisions =
    ::testing::Types<At<Precision::kFp32>, At<Precision::kBf16>, At<Precision::kFp16>>;
class PrecisionNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return nn::to_string(T::value);
  }
};
TYPED_TEST_SUITE(CudaPrecisionTest, Precisions, PrecisionNames);

Conv2dGeometry conv(int64_t n, int64_t c, int64_t h, int64_t k, int64_t r, int64_t stride,
                    int64_t pad) {
  Conv2dGeometry g;
  g.batch = n, g.in_channels = c, g.in_h = h, g.in_w = h;
  g.out_channels = k, g.kernel_h = r, g.kernel_w = r, g.stride = stride, g.pad = pad;
  return g;
}

TYPED_TEST(CudaPrecisionTest, NameSaysThePrecision) {
  const std::string name = this->gpu_->name();
  if (this->kPrecision == Precision::kFp32) {
    EXPECT_EQ(name.find("fp32"), std::string::npos) << name;
  } else {
    EXPECT_NE(name.find(nn::to_string(this->kPrecision)), std::string::npos) << name;
  }
}

TYPED_TEST(CudaPrecisionTest, ConvolutionsMatchTheFloat32Cpu) {
  // alexnet_cifar's first two layers, and odd sizes (channel counts that are
  // not multiples of 8 are legal for tensor-op math through cuDNN's padding).
  for (const Conv2dGeometry& g :
       {conv(4, 3, 32, 64, 3, 2, 1), conv(4, 64, 8, 192, 3, 1, 1), conv(3, 5, 9, 7, 3, 2, 1)}) {
    SCOPED_TRACE(testing::geometry_name(g));
    cuda_test::expect_conv_matches(*this->cpu_, *this->gpu_, g, true, this->tolerance(),
                                   {0.0, 1e-4, 1e-4});  // db: float32 at every precision
  }
}

// Every direction of a plan keeps a math type the precision allows (FMA at
// fp32: never TF32; tensor-op at 16 bits, or the default math of an
// algorithm without a tensor-core version) and the workspace cuDNN asks for
// its chosen algorithm under that math type, measured (cudnnFind) or by
// heuristics.
TYPED_TEST(CudaPrecisionTest, PlansKeepTheMathTypeAndTheirAlgorithmsWorkspace) {
  const cudnnMathType_t own =
      this->kPrecision == Precision::kFp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  const auto allowed = [&](cudnnMathType_t m) {
    // DEFAULT entries run as they are only at 16 bits (fp32 runs them as FMA).
    return m == own ||
           (cuda::default_math_entries(this->kPrecision) == cuda::DefaultMathEntries::kAsTheyAre &&
            m == CUDNN_DEFAULT_MATH);
  };
  for (const bool deterministic : {true, false}) {
    cuda::DeviceContext ctx(0, deterministic, this->kPrecision);
    const Conv2dGeometry g = conv(8, 64, 16, 128, 3, 1, 1);
    cuda::ConvPlan& plan = ctx.conv_plan(g);
    EXPECT_EQ(&plan, &ctx.conv_plan(g));  // cached per shape
    cudnnConvolutionDescriptor_t desc = plan.conv.get();
    size_t bytes = 0;
    EXPECT_TRUE(allowed(plan.forward.math)) << plan.forward.math;
    ASSERT_EQ(cudnnSetConvolutionMathType(desc, plan.forward.math), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn(), plan.x.get(), plan.w.get(), desc,
                                                      plan.y.get(), plan.forward.algo, &bytes),
              CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(plan.forward.workspace_bytes, bytes);
    EXPECT_TRUE(allowed(plan.backward_data.math)) << plan.backward_data.math;
    ASSERT_EQ(cudnnSetConvolutionMathType(desc, plan.backward_data.math), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(
        cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn(), plan.w.get(), plan.y.get(), desc,
                                                     plan.x.get(), plan.backward_data.algo, &bytes),
        CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(plan.backward_data.workspace_bytes, bytes);
    EXPECT_TRUE(allowed(plan.backward_filter.math)) << plan.backward_filter.math;
    ASSERT_EQ(cudnnSetConvolutionMathType(desc, plan.backward_filter.math), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.cudnn(), plan.x.get(),
                                                             plan.y.get(), desc, plan.w.get(),
                                                             plan.backward_filter.algo, &bytes),
              CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(plan.backward_filter.workspace_bytes, bytes);
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "the search left an error behind";
  }
}

TYPED_TEST(CudaPrecisionTest, GemmsMatchTheFloat32Cpu) {
  struct Case {
    bool ta, tb;
    int64_t m, n, k;
    float alpha, beta;
  };
  for (const Case& c : {Case{false, true, 16, 4096, 1024, 1.0f, 0.0f},  // classifier forward
                        Case{true, false, 4096, 1024, 16, 1.0f, 0.0f},  // its weight gradient
                        Case{false, false, 16, 1024, 4096, 1.0f, 0.0f},
                        Case{true, true, 7, 5, 3, 2.0f, 0.5f}}) {  // beta reads the float32 C
    SCOPED_TRACE(::testing::Message() << "ta=" << c.ta << " tb=" << c.tb << " m=" << c.m
                                      << " n=" << c.n << " k=" << c.k);
    const Tensor a = random_tensor({c.ta ? c.k : c.m, c.ta ? c.m : c.k}, 12);
    const Tensor b = random_tensor({c.tb ? c.n : c.k, c.tb ? c.k : c.n}, 13);
    Tensor cc = random_tensor({c.m, c.n}, 14);
    const Tensor ad = to_device(a), bd = to_device(b);
    Tensor cd = to_device(cc);
    this->cpu_->gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), b.data(), c.beta, cc.data());
    this->gpu_->gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, ad.data(), bd.data(), c.beta, cd.data());
    expect_close(cc, cd, this->tolerance(), "C");
  }
}

TYPED_TEST(CudaPrecisionTest, LossRejectsALabelOutOfRangeAfterItsOneWait) {
  const int64_t rows = 6, cols = 4;
  const Tensor logits = to_device(random_tensor({rows, cols}, 21));
  Tensor grad({rows, cols}, Device::kCuda);
  const cuda_test::DeviceLabels labels({0, 1, 2, 3, 7, 1});
  try {
    this->gpu_->softmax_cross_entropy(rows, cols, logits.data(), labels.data(), 1.0f, grad.data(),
                                      0.0f);
    FAIL() << "no InputError for label 7 of 4 classes";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "softmax_cross_entropy: label 7 of row 4 is outside [0, 4); check that the data "
              "set's labels match the model's number of classes");
  }
  const cuda_test::DeviceLabels good({0, 1, 2, 3, 0, 1});
  const LossStats stats =
      this->gpu_->nll_loss(rows, cols, logits.data(), good.data(), 1.0f, grad.data());
  EXPECT_EQ(stats.count, rows);  // the backend is still usable afterwards
}

// Mean losses of 30 SGD steps of mnist_net (dropout on) on the band batch
// (support/band_batch.h; on the CPU it learns it: tests/test_band_batch.cpp).
std::vector<double> train_losses(Backend& backend) {
  const testing::BandBatch b = testing::band_batch();
  const Tensor x = to_device(b.x);
  const cuda_test::DeviceLabels labels(b.labels);
  return testing::band_batch_losses(backend, Device::kCuda, x, labels.data(), b.ids);
}

// The first ten steps within 5% (bf16) or 1% (fp16) of fp32's initial loss
// (fp32 itself: 1e-4), every step after within 5 times that (16-bit
// roundings flip max-pool and ReLU near-ties, and the trajectories part
// slowly), and the batch is being learnt (the loss halves).
TYPED_TEST(CudaPrecisionTest, TrainingLossTracksFp32) {
  auto fp32 = make_cuda_backend(0, true, Precision::kFp32);
  const std::vector<double> want = train_losses(*fp32);
  const std::vector<double> got = train_losses(*this->gpu_);
  const double rel = this->kPrecision == Precision::kBf16   ? 5e-2
                     : this->kPrecision == Precision::kFp16 ? 1e-2
                                                            : 1e-4;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], (i < 10 ? 1.0 : 5.0) * rel * want.front()) << "step " << i;
  }
  EXPECT_LT(got.back(), 0.5 * got.front());
}

}  // namespace
}  // namespace lockstep::nn

#else  // !LOCKSTEP_HAVE_CUDA

TEST(CudaPrecision, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("no 16-bit CUDA paths to test");
}

#endif
