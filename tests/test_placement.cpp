// app/platform/placement.h: the GPU each local rank takes and the default thread
// count, exhaustively over small nodes; the readers of this process's
// affinity mask and CUDA_VISIBLE_DEVICES.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "app/platform/placement.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/scoped_env.h"

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

RankGpu on_gpu(const std::string& host, int device, const std::string& bus_id) {
  RankGpu r;
  r.host = host;
  r.node = host + "/boot";  // node_key's form
  r.device = device;
  r.bus_id = bus_id;
  return r;
}

RankGpu without_gpu(const std::string& problem, bool cuda_usable) {
  RankGpu r;
  r.host = "c";
  r.problem = problem;
  r.cuda_usable = cuda_usable;
  return r;
}

TEST(Placement, EveryRankOnAGpuOfItsOwn) {
  // Two hosts, each numbering its GPUs 0 and 1: the bus ids repeat across hosts only.
  const std::vector<RankGpu> ranks = {
      on_gpu("a", 0, "0000:41:00.0"), on_gpu("a", 0, "0000:42:00.0"),
      on_gpu("b", 0, "0000:41:00.0"), on_gpu("b", 1, "0000:42:00.0")};
  for (bool required : {false, true}) {
    for (int rank = 0; rank < 4; ++rank) {
      const DevicePlan p = plan_devices(required, false, ranks, rank);
      EXPECT_TRUE(p.gpu);
      EXPECT_EQ(p.device, ranks[static_cast<size_t>(rank)].device);
      EXPECT_FALSE(p.shared);
      EXPECT_FALSE(p.job_shares);
      EXPECT_EQ(p.error, "");
      EXPECT_EQ(p.note, "");
    }
  }
}

// Each rank sees one GPU, device 0, and it is the same one (a 1-GPU box
// under mpiexec -n 2, a job-wide CUDA_VISIBLE_DEVICES=0): NCCL would refuse
// "Duplicate GPU" at start-up.
TEST(Placement, RanksMeetingOnOneGpuAreRefusedOrFallBackOrShare) {
  const std::vector<RankGpu> ranks = {on_gpu("a", 0, "0000:41:00.0"),
                                      on_gpu("a", 0, "0000:41:00.0"),
                                      on_gpu("b", 0, "0000:41:00.0")};
  const std::string why =
      "ranks 0, 1 on a take the same GPU 0000:41:00.0 (give each rank its own: "
      "jobs/gpu_affinity.sh, srun --gpus-per-task=1; or set gpu_share = true)";
  for (int rank = 0; rank < 3; ++rank) {
    const DevicePlan cuda = plan_devices(true, false, ranks, rank);
    EXPECT_EQ(cuda.error, "config key device is \"cuda\": " + why);
    EXPECT_FALSE(cuda.gpu);
    const DevicePlan autos = plan_devices(false, false, ranks, rank);
    EXPECT_EQ(autos.error, "");
    EXPECT_EQ(autos.note, "device auto runs on the CPU on every rank: " + why);
    EXPECT_FALSE(autos.gpu) << "rank " << rank << " (its own GPU, but the job runs on the CPU)";
    for (bool required : {false, true}) {
      const DevicePlan share = plan_devices(required, true, ranks, rank);
      EXPECT_TRUE(share.gpu);
      EXPECT_EQ(share.device, 0);
      EXPECT_EQ(share.shared, rank < 2) << rank;
      EXPECT_TRUE(share.job_shares);
      EXPECT_EQ(share.error + share.note, "");
    }
  }
  // Containers on two nodes may share a host name: the node key (host and
  // boot id) tells them apart.
  std::vector<RankGpu> containers = {on_gpu("c", 0, "0000:41:00.0"),
                                     on_gpu("c", 0, "0000:41:00.0")};
  containers[0].node = "c/boot-1";
  containers[1].node = "c/boot-2";
  EXPECT_TRUE(plan_devices(true, false, containers, 1).gpu);
  containers[1].node = containers[0].node;
  EXPECT_NE(
      plan_devices(true, false, containers, 1).error.find("ranks 0, 1 on c take the same GPU"),
      std::string::npos);
  // Without bus ids (a plugin that could not tell), choose_gpu's sharing stands.
  std::vector<RankGpu> unknown = {on_gpu("a", 0, ""), on_gpu("a", 1, "")};
  unknown[1].shared = true;
  EXPECT_FALSE(plan_devices(true, true, unknown, 0).shared);
  EXPECT_TRUE(plan_devices(true, true, unknown, 0).job_shares);
  EXPECT_TRUE(plan_devices(true, true, unknown, 1).shared);
}

TEST(Placement, ARankWithoutAGpuPutsTheJobOnTheCpu) {
  const std::vector<RankGpu> ranks = {
      on_gpu("a", 0, "0000:41:00.0"),
      without_gpu("rank 1 on c cannot start a GPU run: no CUDA driver", false),
      without_gpu("3 ranks on c but only 2 GPUs are visible to each (local rank 2)", true)};
  for (int rank = 0; rank < 3; ++rank) {
    const DevicePlan cuda = plan_devices(true, true, ranks, rank);
    EXPECT_EQ(cuda.error,
              "config key device is \"cuda\": rank 1 on c cannot start a GPU run: no CUDA driver "
              "(and 1 more rank); use device = \"cpu\" (or \"auto\")");
    const DevicePlan autos = plan_devices(false, true, ranks, rank);
    EXPECT_FALSE(autos.gpu);
    EXPECT_EQ(autos.device, -1);
    EXPECT_EQ(autos.note,
              "device auto runs on the CPU on every rank: rank 1 on c cannot start a GPU run: no "
              "CUDA driver (and 1 more rank)");
  }
  // No rank has CUDA at all (a CPU cluster): auto says nothing.
  const std::vector<RankGpu> cpus = {without_gpu("no driver", false),
                                     without_gpu("no driver", false)};
  const DevicePlan quiet = plan_devices(false, false, cpus, 1);
  EXPECT_FALSE(quiet.gpu);
  EXPECT_EQ(quiet.note + quiet.error, "");
  EXPECT_EQ(plan_devices(true, false, cpus, 1).error,
            "config key device is \"cuda\": no driver (and 1 more rank); use device = \"cpu\" (or "
            "\"auto\")");
}

TEST(Placement, GradientEngineTakesNcclOnlyWhereItCanServe) {
  DevicePlan gpus;
  gpus.gpu = true;
  gpus.device = 0;
  DevicePlan shared = gpus;
  shared.job_shares = true;
  const DevicePlan cpus;
  struct Case {
    std::string engine;
    const DevicePlan* plan;
    int size;
    std::string compression;
    bool nccl;
    std::string why;  // "" when no error
  };
  const std::vector<Case> cases = {
      {"auto", &gpus, 2, "none", true, ""},
      {"nccl", &gpus, 2, "none", true, ""},
      {"mpi", &gpus, 2, "none", false, ""},
      {"auto", &gpus, 1, "none", false, ""},
      {"nccl", &gpus, 1, "none", false, ""},  // one rank: nothing to reduce
      {"auto", &cpus, 4, "none", false, ""},
      {"nccl", &cpus, 4, "none", false, "the job runs on the CPU"},
      {"auto", &shared, 4, "none", false, ""},
      {"nccl", &shared, 4, "none", false, "ranks share a GPU (gpu_share)"},
      {"auto", &gpus, 4, "fp16", false, ""},
      {"nccl", &gpus, 4, "bf16", false, "compression = \"bf16\" converts and reduces on the host"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.engine + ", size " + std::to_string(c.size) + ", " + c.compression);
    const GradientEngineChoice g = choose_gradient_engine(c.engine, *c.plan, c.size, c.compression);
    EXPECT_EQ(g.nccl, c.nccl);
    if (c.why.empty()) {
      EXPECT_EQ(g.error, "");
    } else {
      EXPECT_NE(g.error.find("config key gradient_engine = \"nccl\" needs every rank on a GPU of "
                             "its own and compression = \"none\", but " +
                             c.why),
                std::string::npos)
          << g.error;
      EXPECT_NE(g.error.find("(use gradient_engine = \"auto\" or \"mpi\")"), std::string::npos);
    }
  }
}

TEST(Placement, DefaultThreadsUsesTheMaskOrSharesTheMachine) {
  EXPECT_EQ(default_threads({8, 8}, 32, 4), 8);    // aprun -d 8, --depth 8, srun -c 8
  EXPECT_EQ(default_threads({1, 1}, 32, 4), 1);    // srun without -c: one core
  EXPECT_EQ(default_threads({32, 32}, 32, 4), 8);  // unbound: the machine shared by 4 ranks
  EXPECT_EQ(default_threads({2, 2}, 2, 1), 2);
  EXPECT_EQ(default_threads({2, 2}, 2, 3), 1);  // never below 1
  EXPECT_EQ(default_threads({0, 0}, 2, 1), 1);
  EXPECT_EQ(threads_reason({8, 8}, 32, 4), "8 CPUs in affinity mask");
  EXPECT_EQ(threads_reason({1, 1}, 32, 4), "1 CPU in affinity mask");
  EXPECT_EQ(threads_reason({32, 32}, 32, 4), "32 of 32 CPUs / 4 ranks per node");
}

// With SMT a core's second hardware thread adds no FMA unit: srun -c 32
// --cpu-bind=cores on Perlmutter (2 threads a core) gives 16 cores, and
// 16 threads; aprun -d 32 -j 2 on Theta the same.
TEST(Placement, DefaultThreadsTakesOnePerCore) {
  EXPECT_EQ(default_threads({32, 16}, 256, 4), 16);
  EXPECT_EQ(threads_reason({32, 16}, 256, 4), "32 CPUs (16 cores) in affinity mask");
  EXPECT_EQ(default_threads({256, 128}, 256, 4), 32);  // unbound: cores shared by 4 ranks
  EXPECT_EQ(threads_reason({256, 128}, 256, 4), "256 of 256 CPUs (128 cores) / 4 ranks per node");
  EXPECT_EQ(default_threads({2, 1}, 2, 4), 1);
  // --hint=nomultithread: one CPU of each core in the mask.
  EXPECT_EQ(default_threads({32, 32}, 256, 4), 32);
}

void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// The topology as Linux describes it, in a stand-in sysfs folder: CPUs n and
// n + 4 are the two threads of core n.
TEST(Placement, CoresComeFromTheThreadSiblings) {
  testing::ScratchDir dir;
  for (int cpu = 0; cpu < 8; ++cpu) {
    const int core = cpu % 4;
    write_text(dir.file("cpu" + std::to_string(cpu) + "/topology/thread_siblings_list"),
               cpu == 1 || cpu == 5 ? "1-1,5\n"
                                    : std::to_string(core) + "," + std::to_string(core + 4) + "\n");
  }
  write_text(dir.file("cpu9/topology/thread_siblings_list"), "garbage\n");
  const auto core_of = [&](int cpu) { return core_of_cpu(cpu, dir.path()); };
  EXPECT_EQ(core_of(6), 2);
  EXPECT_EQ(core_of(5), 1);
  EXPECT_EQ(core_of(8), -1);  // no such CPU
  EXPECT_EQ(core_of(9), -1);  // unreadable
  EXPECT_EQ(distinct_cores({0, 1, 2, 3, 4, 5, 6, 7}, core_of), 4);
  EXPECT_EQ(distinct_cores({0, 4}, core_of), 1);
  EXPECT_EQ(distinct_cores({0, 1, 4}, core_of), 2);
  // A CPU whose core is unknown counts as a core of its own.
  EXPECT_EQ(distinct_cores({0, 4, 8, 9}, core_of), 3);
  EXPECT_EQ(distinct_cores({}, core_of), 0);
}

TEST(Placement, AffinityCountHasACoreForEveryCpuAtMost) {
  const CpuCount mask = affinity_count();
  EXPECT_EQ(mask.cpus, static_cast<int>(affinity_cpus().size()));
  EXPECT_GE(mask.cores, 1);
  EXPECT_LE(mask.cores, mask.cpus);
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
  testing::ScopedEnv env("CUDA_VISIBLE_DEVICES", nullptr);
  EXPECT_FALSE(cuda_visible_devices().set);
  env.set("3,2");
  auto v = cuda_visible_devices();
  EXPECT_TRUE(v.set);
  EXPECT_EQ(v.entries, (std::vector<std::string>{"3", "2"}));
  env.set("");
  EXPECT_TRUE(cuda_visible_devices().entries.empty());
  env.set("1,-1,0");  // the runtime stops at an invalid entry
  EXPECT_EQ(cuda_visible_devices().entries, (std::vector<std::string>{"1"}));
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
