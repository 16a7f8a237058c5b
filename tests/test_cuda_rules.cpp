// The CUDA backend's rules that need no GPU, run in every build: which cuDNN
// result is chosen (nn/cuda/algorithm_choice.h), when the runtime's last
// error is consumed (nn/cuda/error_rules.h, against a scripted fake
// runtime), and the precision names (nn/cuda/math_types.h).
#include <gtest/gtest.h>

#include <deque>
#include <utility>
#include <vector>

#include "nn/cuda/algorithm_choice.h"
#include "nn/cuda/error_rules.h"
#include "nn/cuda/math_types.h"

namespace lockstep::nn::cuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

AlgorithmCandidate entry(int algo, ConvMath math, float ms, size_t memory, bool det = true) {
  return {algo, true, ms, memory, math, det};
}

TEST(CudnnAlgorithmChoice, SkipsFasterEntriesOfAnotherMathType) {
  // As cudnnFind reports on an A100: DEFAULT (TF32) entries first.
  const std::vector<AlgorithmCandidate> found{
      entry(1, ConvMath::kDefault, 0.10f, 4 * kMiB),
      entry(7, ConvMath::kTensorOp, 0.12f, 0),
      entry(6, ConvMath::kTensorOpAllowConversion, 0.13f, 0),
      entry(1, ConvMath::kFma, 0.40f, 2 * kMiB),
      entry(0, ConvMath::kFma, 0.55f, 0),
  };
  const auto fma = choose_algorithm(found, {ConvMath::kFma, false, 64 * kMiB});
  ASSERT_TRUE(fma.has_value());
  EXPECT_EQ(*fma, 3u);  // algo 1 with FMA, not the DEFAULT entry of algo 1
  const auto tensor_op = choose_algorithm(found, {ConvMath::kTensorOp, false, 64 * kMiB});
  ASSERT_TRUE(tensor_op.has_value());
  EXPECT_EQ(*tensor_op, 1u);
}

TEST(CudnnAlgorithmChoice, DefaultMathIsChosenOnlyForADefaultDescriptor) {
  const std::vector<AlgorithmCandidate> found{entry(2, ConvMath::kDefault, 0.1f, 0)};
  EXPECT_FALSE(choose_algorithm(found, {ConvMath::kFma, false, kMiB}).has_value());
  EXPECT_EQ(choose_algorithm(found, {ConvMath::kDefault, false, kMiB}), 0u);
}

// At 16 bits cuDNN reports the algorithms without a tensor-core version as
// DEFAULT under a TENSOR_OP descriptor: usable then, in cuDNN's order, run as
// DEFAULT.
TEST(CudnnAlgorithmChoice, DefaultMathEntriesServeSixteenBitConvolutions) {
  const std::vector<AlgorithmCandidate> only_default{entry(2, ConvMath::kDefault, 0.1f, 0),
                                                     entry(0, ConvMath::kDefault, 0.2f, 0)};
  const AlgorithmRequirements bf16{ConvMath::kTensorOp, false, kMiB,
                                   default_math_entries(Precision::kBf16)};
  EXPECT_EQ(algorithm_order(only_default, bf16),
            (std::vector<AlgorithmTry>{{0, ConvMath::kDefault}, {1, ConvMath::kDefault}}));
  EXPECT_FALSE(choose_algorithm(only_default, {ConvMath::kTensorOp, false, kMiB}).has_value());
  const std::vector<AlgorithmCandidate> mixed{entry(7, ConvMath::kTensorOp, 0.1f, 0),
                                              entry(2, ConvMath::kDefault, 0.2f, 0),
                                              entry(1, ConvMath::kFma, 0.3f, 0)};
  EXPECT_EQ(choose_algorithm(mixed, bf16), 0u);
  std::vector<AlgorithmCandidate> slow_tensor_op = mixed;
  std::swap(slow_tensor_op[0], slow_tensor_op[1]);  // cuDNN timed DEFAULT faster
  EXPECT_EQ(algorithm_order(slow_tensor_op, bf16),
            (std::vector<AlgorithmTry>{{0, ConvMath::kDefault}, {1, ConvMath::kTensorOp}}));
  EXPECT_EQ(default_math_entries(Precision::kFp16), DefaultMathEntries::kAsTheyAre);
}

// At fp32 a DEFAULT entry would be TF32 run as it is. If cuDNN labels its
// float32 kernels DEFAULT under an FMA descriptor, they are still tried, after
// every FMA entry, and run with the descriptor's FMA: never TF32, and never a
// fp32 convolution without an algorithm.
TEST(CudnnAlgorithmChoice, FloatRunsDefaultEntriesOnlyAsFmaAndLast) {
  const AlgorithmRequirements fp32{conv_math(Precision::kFp32), false, kMiB,
                                   default_math_entries(Precision::kFp32)};
  const std::vector<AlgorithmCandidate> mixed{
      entry(2, ConvMath::kDefault, 0.1f, 0), entry(7, ConvMath::kTensorOp, 0.2f, 0),
      entry(1, ConvMath::kFma, 0.3f, 0), entry(0, ConvMath::kDefault, 0.4f, 0),
      entry(5, ConvMath::kFma, 0.5f, 0)};
  EXPECT_EQ(
      algorithm_order(mixed, fp32),
      (std::vector<AlgorithmTry>{
          {2, ConvMath::kFma}, {4, ConvMath::kFma}, {0, ConvMath::kFma}, {3, ConvMath::kFma}}));
  const std::vector<AlgorithmCandidate> labelled_default{entry(1, ConvMath::kDefault, 0.1f, 0),
                                                         entry(0, ConvMath::kDefault, 0.2f, 0)};
  for (const AlgorithmTry& t : algorithm_order(labelled_default, fp32))
    EXPECT_EQ(t.math, ConvMath::kFma);
  EXPECT_EQ(choose_algorithm(labelled_default, fp32), 0u);
  EXPECT_EQ(default_math_entries(Precision::kFp32), DefaultMathEntries::kLastAsDescriptors);
  EXPECT_EQ(conv_math(Precision::kFp32), ConvMath::kFma);
}

// The error when nothing is usable lists every candidate.
TEST(CudnnAlgorithmChoice, DescribesEveryCandidate) {
  std::vector<AlgorithmCandidate> found{entry(1, ConvMath::kFma, 0.4f, 2 * kMiB),
                                        entry(6, ConvMath::kDefault, 0.1f, 0, false),
                                        entry(0, ConvMath::kTensorOp, -1.0f, 0)};
  found[1].succeeded = false;
  EXPECT_EQ(
      describe_candidates(found),
      "algo 1 FMA 0.400 ms 2097152 B deterministic; algo 6 DEFAULT failed; algo 0 TENSOR_OP 0 "
      "B deterministic");
  EXPECT_EQ(describe_candidates({}), "none");
}

TEST(CudnnAlgorithmChoice, HonoursStatusDeterminismAndWorkspaceLimit) {
  std::vector<AlgorithmCandidate> found{
      entry(5, ConvMath::kFma, 0.1f, 0),           // failed (below)
      entry(4, ConvMath::kFma, 0.2f, 0, false),    // not deterministic
      entry(3, ConvMath::kFma, 0.3f, 128 * kMiB),  // too much memory
      entry(2, ConvMath::kFma, 0.4f, 8 * kMiB),   entry(1, ConvMath::kFma, 0.5f, 0),
  };
  found[0].succeeded = false;
  EXPECT_EQ(choose_algorithm(found, {ConvMath::kFma, false, 64 * kMiB}), 1u);
  EXPECT_EQ(choose_algorithm(found, {ConvMath::kFma, true, 64 * kMiB}), 3u);
  EXPECT_EQ(choose_algorithm(found, {ConvMath::kFma, true, 4 * kMiB}), 4u);
  EXPECT_EQ(choose_algorithm(found, {ConvMath::kFma, false, 256 * kMiB}), 1u);
}

TEST(CudnnAlgorithmChoice, NothingUsableIsNoChoice) {
  EXPECT_FALSE(choose_algorithm({}, {ConvMath::kFma, false, kMiB}).has_value());
  std::vector<AlgorithmCandidate> found{entry(0, ConvMath::kTensorOp, 0.1f, 0),
                                        entry(1, ConvMath::kFma, 0.2f, 2 * kMiB)};
  EXPECT_FALSE(choose_algorithm(found, {ConvMath::kFma, false, kMiB}).has_value());
}

// A fake runtime: calls fail with scripted statuses and set the thread's
// last error as the CUDA runtime does; sticky errors never clear.
struct FakeRuntime {
  using Status = int;
  static constexpr Status kSuccess = 0;
  static constexpr Status kInvalidDevice = 101, kMemoryAllocation = 2, kIllegalAddress = 700;
  Status last = kSuccess;
  bool sticky = false;
  Status call(Status result) {  // a runtime call returning `result`
    if (sticky) return last;
    if (result != kSuccess) last = result;
    if (is_sticky(result)) sticky = true;
    return result;
  }
  Status get_last_error() {
    const Status s = last;
    if (!sticky) last = kSuccess;
    return s;
  }
  bool is_sticky(Status s) const { return s == kIllegalAddress; }
};

TEST(CudaErrorRules, AFailureConsumedWhereThrownIsNotReportedByTheNextLaunch) {
  FakeRuntime rt;
  // cudaSetDevice(1 << 20) fails on one rank; CUDA_CHECK throws after consuming it.
  const int failed = rt.call(FakeRuntime::kInvalidDevice);
  EXPECT_EQ(consume_failure(rt, failed), FakeRuntime::kInvalidDevice);
  rt.call(FakeRuntime::kSuccess);  // a good launch in the next test
  EXPECT_EQ(launch_status(rt), FakeRuntime::kSuccess);
}

TEST(CudaErrorRules, WithoutConsumingTheLaunchCheckReportsAStaleError) {
  FakeRuntime rt;
  rt.call(FakeRuntime::kInvalidDevice);  // thrown without consuming (the old CUDA_CHECK)
  rt.call(FakeRuntime::kSuccess);
  EXPECT_EQ(launch_status(rt), FakeRuntime::kInvalidDevice);  // the defect the rule removes
  EXPECT_EQ(launch_status(rt), FakeRuntime::kSuccess);
}

TEST(CudaErrorRules, ProbeErrorsAreDiscardedUnlessSticky) {
  FakeRuntime rt;
  rt.call(FakeRuntime::kMemoryAllocation);  // cudnnFind tried an algorithm that did not fit
  EXPECT_EQ(discard_probe_errors(rt), FakeRuntime::kSuccess);
  EXPECT_EQ(launch_status(rt), FakeRuntime::kSuccess);

  rt.call(FakeRuntime::kIllegalAddress);  // the context is lost
  EXPECT_EQ(discard_probe_errors(rt), FakeRuntime::kIllegalAddress);
  EXPECT_EQ(launch_status(rt), FakeRuntime::kIllegalAddress);
}

TEST(CudaErrorRules, ALaunchFailureIsReportedOnceByItsOwnCheck) {
  FakeRuntime rt;
  rt.call(FakeRuntime::kMemoryAllocation);  // the launch just made failed
  EXPECT_EQ(launch_status(rt), FakeRuntime::kMemoryAllocation);
  EXPECT_EQ(launch_status(rt), FakeRuntime::kSuccess);
}

TEST(CudaPrecision, NamesAndMathTypes) {
  EXPECT_EQ(parse_precision("fp32"), Precision::kFp32);
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_EQ(parse_precision("fp16"), Precision::kFp16);
  EXPECT_FALSE(parse_precision("tf32").has_value());
  EXPECT_FALSE(parse_precision("FP32").has_value());
  EXPECT_STREQ(to_string(Precision::kBf16), "bf16");
  EXPECT_EQ(conv_math(Precision::kFp32), ConvMath::kFma);  // never TF32 at fp32
  EXPECT_EQ(conv_math(Precision::kBf16), ConvMath::kTensorOp);
  EXPECT_EQ(conv_math(Precision::kFp16), ConvMath::kTensorOp);
  EXPECT_EQ(element_bytes(Precision::kFp32), 4);
  EXPECT_EQ(element_bytes(Precision::kFp16), 2);
}

}  // namespace
}  // namespace lockstep::nn::cuda
