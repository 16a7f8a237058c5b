// app/platform/placement.h: the GPU each local rank takes and the default thread
// count, exhaustively over small nodes; the readers of this process's
// affinity mask and CUDA_VISIBLE_DEVICES.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "app/platform/placement.h"
#include "support/dataset_files.h"
#include "support/run_command.h"

namespace lockstep::app {
namespace {

TEST(Placement, ChooseGpuFollowsTheRuleForEveryNodeShape) {
  for (int local_size = 1; local_size <= 9; ++local_size) {
    for (int visible = 0; visible <= 9; ++visible) {
      for (bool share : {false, true}) {
        std::set<int> taken;
        for (int local_rank = 0; local_rank < local_size; ++local_rank) {
          const GpuChoice c = choose_gpu(local_rank, local_size, visible, share, "node7");
          SCOPED_TRACE(::testing::Message() << "local rank " << local_rank << " of " << local_size
                                            << ", " << visible << " visible, share " << share);
          if (visible == 0) {
            EXPECT_EQ(c.device, -1);
            EXPECT_NE(c.error.find("no GPU is visible"), std::string::npos) << c.error;
            EXPECT_NE(c.error.find("node7"), std::string::npos) << c.error;
          } else if (visible == 1) {
            EXPECT_EQ(c.device, 0);  // the launcher gave this rank its GPU
            EXPECT_FALSE(c.shared);
          } else if (visible >= local_size) {
            EXPECT_EQ(c.device, local_rank);
            EXPECT_FALSE(c.shared);
            EXPECT_TRUE(taken.insert(c.device).second) << "two local ranks on one GPU";
          } else if (share) {
            EXPECT_EQ(c.device, local_rank % visible);
            EXPECT_TRUE(c.shared);
          } else {
            EXPECT_EQ(c.device, -1);
            const std::string counts = std::to_string(local_size) + " ranks on node7 but only " +
                                       std::to_string(visible) + " GPUs";
            EXPECT_NE(c.error.find(counts), std::string::npos) << c.error;
            EXPECT_NE(c.error.find("gpu_share = true"), std::string::npos) << c.error;
          }
          EXPECT_EQ(c.device >= 0, c.error.empty()) << c.error;
          if (c.device >= 0) {
            EXPECT_LT(c.device, visible);
          }
        }
      }
    }
  }
}

TEST(Placement, PolarisAndThetaGpuPictures) {
  // gpu_affinity.sh and srun --gpus-per-task=1: every rank sees one GPU.
  for (int r = 0; r < 8; ++r) EXPECT_EQ(choose_gpu(r, 8, 1, false, "n").device, 0);
  // All GPUs visible to each of 4 ranks: the local rank's.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(choose_gpu(r, 4, 4, false, "n").device, r);
}

TEST(Placement, DefaultThreadsUsesTheMaskOrSharesTheMachine) {
  EXPECT_EQ(default_threads(8, 32, 4), 8);   // aprun -d 8, --depth 8, srun -c 8
  EXPECT_EQ(default_threads(1, 32, 4), 1);   // srun without -c: one core
  EXPECT_EQ(default_threads(32, 32, 4), 8);  // unbound: the machine shared by 4 ranks
  EXPECT_EQ(default_threads(2, 2, 1), 2);
  EXPECT_EQ(default_threads(2, 2, 3), 1);  // never below 1
  EXPECT_EQ(default_threads(0, 2, 1), 1);
  EXPECT_EQ(threads_reason(8, 32, 4), "8 CPUs in affinity mask");
  EXPECT_EQ(threads_reason(1, 32, 4), "1 CPU in affinity mask");
  EXPECT_EQ(threads_reason(32, 32, 4), "32 of 32 CPUs / 4 ranks per node");
}

TEST(Placement, CpuListString) {
  EXPECT_EQ(cpu_list_string({}), "");
  EXPECT_EQ(cpu_list_string({3}), "3");
  EXPECT_EQ(cpu_list_string({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

TEST(Placement, AffinityMaskIsWithinTheOnlineCpus) {
  const auto cpus = affinity_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_LE(static_cast<int>(cpus.size()), online_cpus());
}

TEST(Placement, CudaVisibleDevicesEntries) {
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string keep = saved ? saved : "";
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_FALSE(cuda_visible_devices().set);
  setenv("CUDA_VISIBLE_DEVICES", "3,2", 1);
  auto v = cuda_visible_devices();
  EXPECT_TRUE(v.set);
  EXPECT_EQ(v.entries, (std::vector<std::string>{"3", "2"}));
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_TRUE(cuda_visible_devices().entries.empty());
  setenv("CUDA_VISIBLE_DEVICES", "1,-1,0", 1);  // the runtime stops at an invalid entry
  EXPECT_EQ(cuda_visible_devices().entries, (std::vector<std::string>{"1"}));
  if (saved) {
    setenv("CUDA_VISIBLE_DEVICES", keep.c_str(), 1);
  } else {
    unsetenv("CUDA_VISIBLE_DEVICES");
  }
}

}  // namespace
}  // namespace lockstep::app

namespace lockstep::app {
namespace {

// The start-up line says how many threads and why: a taskset mask smaller
// than the machine is used whole.
TEST(Placement, StartUpLineTakesThreadsFromTheAffinityMask) {
  testing::ScratchDir dir;
  testing::write_mnist_dir(dir.file("data"), 64, 32);
  const std::string train = " train --dataset mnist --data-dir " + dir.file("data") +
                            " --epochs 1 --progress plain --run-dir " + dir.file("run");
  auto r = testing::run_command("taskset -c 0 " LOCKSTEP_BINARY + train);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (online_cpus() > 1) {
    EXPECT_NE(r.output.find("1 thread per rank (1 CPU in affinity mask)"), std::string::npos)
        << r.output;
  }
  r = testing::run_command(LOCKSTEP_BINARY + train + " --threads 3 --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 threads per rank (threads key)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lockstep::app
