// nn/cuda/host_rules.h: the CUDA backend's host-side rules, tested in every
// build (no GPU, no CUDA headers): launch sizes, the loss rows' collection,
// the workspace limit, the upload ring.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/error.h"
#include "distributed/cuda/plugin_text.h"
#include "nn/cuda/host_rules.h"

namespace lockstep::nn::cuda {
namespace {

TEST(CudaHostRules, BlocksCoverEveryItemWithinTheClamp) {
  EXPECT_EQ(blocks_for(0), 1u);
  EXPECT_EQ(blocks_for(-5), 1u);
  EXPECT_EQ(blocks_for(1), 1u);
  EXPECT_EQ(blocks_for(kThreadsPerBlock), 1u);
  EXPECT_EQ(blocks_for(kThreadsPerBlock + 1), 2u);
  EXPECT_EQ(blocks_for(kThreadsPerBlock * kMaxBlocks), static_cast<unsigned>(kMaxBlocks));
  // Beyond the clamp the grid-stride loop covers the rest; no overflow at
  // the int64 limit.
  EXPECT_EQ(blocks_for(kThreadsPerBlock * kMaxBlocks + 1), static_cast<unsigned>(kMaxBlocks));
  EXPECT_EQ(blocks_for(std::numeric_limits<int64_t>::max()), static_cast<unsigned>(kMaxBlocks));
  for (int64_t n : {1, 255, 256, 257, 1000, 65535, 1 << 20}) {
    const int64_t threads = int64_t{blocks_for(n)} * kThreadsPerBlock;
    EXPECT_GE(threads, n) << n;
    EXPECT_LT(threads - n, kThreadsPerBlock) << n;
  }
}

TEST(CudaHostRules, LossRowsAreSummedInDoubleAndCountedAsTheCpuDoes) {
  // lse - picked per row: 2.5, 0.25, 2^-24 (lost in a float sum of 5.75), 3
  const std::vector<RowResult> rows = {
      {3.0f, 0.5f, 1, 1}, {0.0f, -0.25f, 0, 2}, {1.0f, 0.99999994f, 4, 4}, {3.0f, 0.0f, 9, 0}};
  const LossStats s = collect_rows("nll_loss", 4, 10, rows.data());
  EXPECT_EQ(s.count, 4);
  EXPECT_EQ(s.correct, 2);
  double expected = 0.0;
  for (const RowResult& r : rows) expected += double{r.lse} - double{r.picked};
  EXPECT_EQ(s.loss_sum, expected);
  EXPECT_NE(s.loss_sum, 5.75);
  const LossStats none = collect_rows("nll_loss", 0, 10, nullptr);
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.loss_sum, 0.0);
}

TEST(CudaHostRules, RowSumsSkipAndCountLabelsOutsideTheClasses) {
  // The one-thread kernel of the accumulating losses sums with sum_rows.
  const std::vector<RowResult> rows = {
      {3.0f, 0.5f, 1, 1}, {0.0f, 0.0f, 0, -1}, {1.0f, 0.25f, 4, 4}, {0.0f, 0.0f, 0, 10}};
  int64_t bad = -1;
  const LossStats s = sum_rows(4, 10, rows.data(), &bad);
  EXPECT_EQ(bad, 2);
  EXPECT_EQ(s.count, 2);
  EXPECT_EQ(s.correct, 2);
  EXPECT_EQ(s.loss_sum, 2.5 + 0.75);
}

TEST(CudaHostRules, ALabelOutsideTheClassesNamesOpAndRow) {
  for (int32_t bad : {-1, 10, 1000}) {
    const std::vector<RowResult> rows = {{0.0f, 0.0f, 0, 3}, {0.0f, 0.0f, 0, bad}};
    try {
      collect_rows("softmax_cross_entropy", 2, 10, rows.data());
      ADD_FAILURE() << "label " << bad << " was accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("softmax_cross_entropy: label " + std::to_string(bad) + " of row 1"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("[0, 10)"), std::string::npos) << what;
    }
  }
}

TEST(CudaHostRules, WorkspaceTakesHalfTheFreeMemoryUpToOneGiB) {
  EXPECT_EQ(workspace_limit_for(0, 0), 0u);
  EXPECT_EQ(workspace_limit_for(0, 100 << 20), size_t{50} << 20);
  // What the workspace holds already counts as available to it.
  EXPECT_EQ(workspace_limit_for(size_t{64} << 20, 100 << 20), size_t{114} << 20);
  EXPECT_EQ(workspace_limit_for(0, size_t{80} << 30), kMaxWorkspaceBytes);
  EXPECT_EQ(workspace_limit_for(size_t{2} << 30, 0), kMaxWorkspaceBytes);
}

TEST(CudaHostRules, UploadRingUsesEverySlotInTurn) {
  UploadRing<4> ring;
  std::vector<size_t> order;
  for (int i = 0; i < 9; ++i) order.push_back(ring.next());
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 0, 1, 2, 3, 0}));
  UploadRing<1> single;
  EXPECT_EQ(single.next(), 0u);
  EXPECT_EQ(single.next(), 0u);
}

TEST(CudaPluginText, CopiesAreCutAndAlwaysTerminated) {
  char out[6];
  std::memset(out, 'x', sizeof(out));
  distributed::copy_c_string("cuda:0 H100", out, sizeof(out));
  EXPECT_STREQ(out, "cuda:");
  distributed::copy_c_string("ok", out, sizeof(out));
  EXPECT_STREQ(out, "ok");
  distributed::copy_c_string("", out, 1);
  EXPECT_STREQ(out, "");
  out[0] = 'y';
  distributed::copy_c_string("z", out, 0);  // no room: untouched
  EXPECT_EQ(out[0], 'y');
  distributed::copy_c_string("z", nullptr, 8);  // no buffer: no crash
}

TEST(CudaPluginText, DeviceLinesDropTheVersionLine) {
  EXPECT_EQ(distributed::device_lines("CUDA 13.0, cuDNN 9.19.0\ncuda:0 A\ncuda:1 B\n"),
            "cuda:0 A\ncuda:1 B\n");
  EXPECT_EQ(distributed::device_lines("CUDA 13.0 only"), "");
  EXPECT_EQ(distributed::device_lines(""), "");
}

}  // namespace
}  // namespace lockstep::nn::cuda
