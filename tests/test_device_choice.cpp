// `device = cpu | cuda | auto` for a rank, from what it sees
// (app/device_choice.h): no GPU needed.
#include <gtest/gtest.h>

#include "app/device_choice.h"

namespace lockstep::app {
namespace {

DeviceView view(const char* requested, int gpus, int local_rank, int local_size) {
  return {.requested = requested,
          .cuda_built = true,
          .gpus = gpus,
          .rank = 4 + local_rank,
          .local_rank = local_rank,
          .local_size = local_size,
          .host = "node7"};
}

TEST(DeviceChoice, CpuIsAlwaysTheCpu) {
  const DeviceChoice c = choose_device(view("cpu", 8, 0, 1));
  EXPECT_FALSE(c.cuda);
  EXPECT_TRUE(c.note.empty());
  EXPECT_TRUE(c.error.empty());
}

TEST(DeviceChoice, AutoTakesTheLocalRanksGpuWhenEveryRankHasOne) {
  const DeviceChoice c = choose_device(view("auto", 4, 3, 4));
  EXPECT_TRUE(c.cuda);
  EXPECT_EQ(c.device_index, 3);
  EXPECT_TRUE(c.note.empty());
}

TEST(DeviceChoice, AutoWithoutGpusOrCudaIsTheCpuWithoutANote) {
  EXPECT_FALSE(choose_device(view("auto", 0, 0, 2)).cuda);
  EXPECT_TRUE(choose_device(view("auto", 0, 0, 2)).note.empty());
  DeviceView no_cuda = view("auto", 2, 0, 1);
  no_cuda.cuda_built = false;
  EXPECT_FALSE(choose_device(no_cuda).cuda);
}

TEST(DeviceChoice, AutoWithMoreRanksThanGpusPutsTheWholeNodeOnTheCpuWithANote) {
  for (int local_rank = 0; local_rank < 4; ++local_rank) {  // rank 0 and 1 too
    const DeviceChoice c = choose_device(view("auto", 2, local_rank, 4));
    EXPECT_FALSE(c.cuda) << "local rank " << local_rank;
    EXPECT_TRUE(c.error.empty());
    EXPECT_EQ(c.note,
              "device = \"auto\": 4 ranks on node7 but only 2 GPU(s) visible there, so its ranks "
              "compute on the CPU; start at most one rank per GPU to use them, or set device = "
              "\"cpu\" to silence this note");
  }
}

TEST(DeviceChoice, CudaWithMoreRanksThanGpusIsAnErrorNamingTheRank) {
  EXPECT_TRUE(choose_device(view("cuda", 2, 1, 4)).cuda);
  const DeviceChoice c = choose_device(view("cuda", 2, 2, 4));
  EXPECT_FALSE(c.cuda);
  EXPECT_EQ(c.error,
            "config key device is \"cuda\": rank 6 is local rank 2 of 4 on node7 but only 2 "
            "GPU(s) are visible there; start at most one rank per GPU, or use device = \"auto\" "
            "to fall back to the CPU");
}

TEST(DeviceChoice, CudaInACpuBuildIsAnError) {
  DeviceView v = view("cuda", 0, 0, 1);
  v.cuda_built = false;
  EXPECT_NE(choose_device(v).error.find("built without CUDA"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::app
