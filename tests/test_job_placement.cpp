// Each job script in jobs/ run under stand-in launchers (tests/launchers/:
// PALS mpiexec, Open MPI mpirun, aprun, srun; each starts its ranks through
// MPICH's mpiexec with the real launcher's variables, CPU binding and GPUs;
// srun and mpirun say how they were called, and mpirun's ranks get only the
// variables it forwards, as on a node other than its own) with
// DOCTOR=1, and `lockstep doctor` under mpiexec with 2 and 3 ranks, with and
// without overlapping taskset pinning: per rank, the CPUs, threads,
// CUDA_VISIBLE_DEVICES and the GPU it would take.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "app/commands/doctor.h"
#include "app/platform/placement.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::contains;
using testing::kSourceDir;
using testing::read_file;
using testing::run_command;
using testing::ScratchDir;

struct Row {
  std::string local, cpus, threads, cuda_visible, gpus, gpu, plugin;
};

// The doctor table's rows, by rank.
std::map<int, Row> rows_of(const std::string& output) {
  static const std::regex row(
      R"(^(\d+)\s+\S+\s+(\d+/\d+)\s+(\S+ \(\d+\))\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+(?: needed)?)\s)");
  std::map<int, Row> rows;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      rows[std::stoi(m[1])] = {m[2], m[3], m[4], m[5], m[6], m[7], m[8]};
    }
  }
  return rows;
}

// A folder the doctor takes for the data set, a run dir, and the environment
// that puts the stand-in launchers first on PATH.
struct JobFixture {
  ScratchDir dir;
  std::string data, run_dir, env;
  JobFixture() {
    data = dir.file("data");
    run_dir = dir.file("run");
    std::filesystem::create_directories(data);
    std::ofstream(data + "/train-images-idx3-ubyte.gz") << "x";
    std::ofstream(dir.file("nodes")) << "node0\n";
    env = "cd " + kSourceDir + " && export PATH=" + kSourceDir +
          "/tests/launchers:$PATH REAL_MPIEXEC=" + LOCKSTEP_MPIEXEC +
          " LOCKSTEP=" LOCKSTEP_BINARY " DOCTOR=1 && timeout 120 env -u CUDA_VISIBLE_DEVICES ";
  }
  std::string options() const { return "--data-dir " + data + " --run-dir " + run_dir; }
  testing::CommandResult run(const std::string& vars_and_script) const {
    return run_command(env + vars_and_script);
  }
  // jobs/polaris.pbs.sh on one node, with PBS settings such as DEPTH=2.
  testing::CommandResult polaris(const std::string& settings) const {
    return run("PBS_NODEFILE=" + dir.file("nodes") + " " + settings +
               " CONFIG=configs/fashion_mnist.toml LOCKSTEP_ARGS='" + options() +
               "' bash jobs/polaris.pbs.sh");
  }
};

void expect_no_placement_problem(const std::string& out) {
  EXPECT_FALSE(contains(out, "take the same GPU")) << out;
  EXPECT_FALSE(contains(out, "pinned to the same CPUs")) << out;
  EXPECT_FALSE(contains(out, "threads but has")) << out;
}

TEST(JobPlacement, PolarisGivesEachRankItsDepthAndOneGpuInReverse) {
  JobFixture f;
  const auto r = f.polaris("RANKS_PER_NODE=2 DEPTH=1 GPUS_PER_NODE=2");
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  EXPECT_EQ(rows[0].cpus, "0 (1)") << r.output;
  EXPECT_EQ(rows[1].cpus, "1 (1)") << r.output;
  for (int rank : {0, 1}) {
    EXPECT_EQ(rows[rank].threads, "1") << r.output;
    EXPECT_EQ(rows[rank].gpus, "1") << r.output;  // gpu_affinity.sh: one visible GPU each
  }
  EXPECT_EQ(rows[0].cuda_visible, "1");  // reverse order: local rank 0 takes the last GPU
  EXPECT_EQ(rows[0].gpu, "1");
  EXPECT_EQ(rows[1].cuda_visible, "0");
  EXPECT_EQ(rows[1].gpu, "0");
  expect_no_placement_problem(r.output);
}

// A node without GPUs: --device auto runs there on the CPU, as lockstep
// chooses; the default (cuda) stops with gpu_affinity.sh's one line.
TEST(JobPlacement, DeviceAutoOnANodeWithoutGpusRunsOnTheCpu) {
  JobFixture f;
  const std::string no_gpus =
      "PBS_NODEFILE=" + f.dir.file("nodes") + " RANKS_PER_NODE=1 DEPTH=1 GPUS_PER_NODE=0 ";
  auto r = f.run(no_gpus + "CONFIG=configs/fashion_mnist.toml LOCKSTEP_ARGS='--device auto " +
                 f.options() + "' bash jobs/polaris.pbs.sh");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u) << r.output;
  EXPECT_EQ(rows[0].gpu, "-") << r.output;
  EXPECT_FALSE(contains(r.output, "no GPU found")) << r.output;
  r = f.run(no_gpus + "CONFIG=configs/fashion_mnist.toml LOCKSTEP_ARGS='" + f.options() +
            "' bash jobs/polaris.pbs.sh");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "gpu_affinity.sh: no GPU found on ")) << r.output;
  EXPECT_TRUE(rows_of(r.output).empty()) << r.output;
}

// A scheduler that gave the job a share of the node's GPUs (its own
// CUDA_VISIBLE_DEVICES): each rank takes one of those, not a GPU outside it.
TEST(JobPlacement, PolarisChoosesAmongTheGpusTheSchedulerGave) {
  JobFixture f;
  const auto r = f.polaris("RANKS_PER_NODE=2 DEPTH=1 GPUS_PER_NODE=4 CUDA_VISIBLE_DEVICES=0,1");
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  EXPECT_EQ(rows[0].cuda_visible, "1") << r.output;  // reverse order within the share
  EXPECT_EQ(rows[1].cuda_visible, "0") << r.output;
  expect_no_placement_problem(r.output);
}

// GPU runs on Polaris take NCCL over Slingshot through the aws-ofi-nccl
// plugin with ALCF's settings, where the plugin is; each rank's doctor line
// shows the NCCL settings it got.
TEST(JobPlacement, PolarisTakesNcclOverSlingshotWhereThePluginIs) {
  JobFixture f;
  const std::string plugin = f.dir.file("aws-ofi-nccl");
  std::filesystem::create_directories(plugin + "/lib");
  std::ofstream(plugin + "/lib/libnccl-net.so") << "x";
  const std::string polaris = "RANKS_PER_NODE=1 DEPTH=1 GPUS_PER_NODE=1 SLINGSHOT=1 ";
  auto r = f.polaris(polaris + "AWS_OFI_NCCL_DIR=" + plugin + " NCCL_CROSS_NIC=0");
  ASSERT_EQ(rows_of(r.output).size(), 1u) << r.output;
  EXPECT_TRUE(contains(r.output, "NCCL over Slingshot through " + plugin + "/lib")) << r.output;
  for (const char* set :
       {"NCCL_NET=AWS Libfabric", "NCCL_NET_GDR_LEVEL=PHB", "NCCL_COLLNET_ENABLE=1",
        "NCCL_CROSS_NIC=0"}) {  // the user's own setting stays
    EXPECT_TRUE(contains(r.output, set)) << set << "\n" << r.output;
  }
  EXPECT_FALSE(contains(r.output, "NCCL_NET_PLUGIN")) << r.output;  // libnccl-net.so: the default
  // No plugin: said once, nothing set (NCCL_NET would stop NCCL from starting).
  r = f.polaris(polaris + "AWS_OFI_NCCL_DIR=" + f.dir.file("nowhere"));
  ASSERT_EQ(rows_of(r.output).size(), 1u) << r.output;
  EXPECT_TRUE(contains(r.output, "no aws-ofi-nccl plugin (libnccl-net*.so)")) << r.output;
  EXPECT_FALSE(contains(r.output, "NCCL_NET=")) << r.output;
  // Turned off, or a CPU run: neither.
  for (const std::string& settings : {polaris + "SLINGSHOT=0 AWS_OFI_NCCL_DIR=" + plugin,
                                      polaris + "DEVICE=cpu AWS_OFI_NCCL_DIR=" + plugin}) {
    r = f.polaris(settings);
    ASSERT_EQ(rows_of(r.output).size(), 1u) << r.output;
    EXPECT_FALSE(contains(r.output, "NCCL_NET=")) << settings << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "aws-ofi-nccl")) << settings << "\n" << r.output;
  }
  // A plugin installed as libnccl-net-ofi.so: NCCL_NET_PLUGIN names it.
  const std::string ofi = f.dir.file("aws-ofi-nccl-new");
  std::filesystem::create_directories(ofi + "/lib");
  std::ofstream(ofi + "/lib/libnccl-net-ofi.so") << "x";
  r = f.polaris(polaris + "AWS_OFI_NCCL_DIR=" + ofi);
  EXPECT_TRUE(contains(r.output, "NCCL_NET_PLUGIN=ofi")) << r.output;
  EXPECT_TRUE(contains(r.output, "NCCL_NET=AWS Libfabric")) << r.output;
  // The libfabric settings, the plugin's folder first on the library path,
  // and the plugin found on LD_LIBRARY_PATH (a site module) as well.
  const auto env = run_command("cd " + kSourceDir + " && SLINGSHOT=1 LD_LIBRARY_PATH=/x:" + plugin +
                               "/lib FI_CXI_DEFAULT_CQ_SIZE=7 bash -c 'source jobs/common.sh && "
                               "slingshot_nccl && env'");
  ASSERT_EQ(env.exit_code, 0) << env.output;
  for (const std::string& set :
       std::vector<std::string>{"FI_CXI_DISABLE_HOST_REGISTER=1", "FI_MR_CACHE_MONITOR=userfaultfd",
                                "FI_CXI_DEFAULT_CQ_SIZE=7", "NCCL_CROSS_NIC=1",
                                "LD_LIBRARY_PATH=" + plugin + "/lib:/x:"}) {
    EXPECT_TRUE(contains(env.output, "\n" + set)) << set << "\n" << env.output;
  }
}

TEST(JobPlacement, PolarisDepthIsTheThreadCount) {
  JobFixture f;
  const auto r = f.polaris("RANKS_PER_NODE=1 DEPTH=2 GPUS_PER_NODE=4");
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u) << r.output;
  EXPECT_EQ(rows[0].cpus, "0-1 (2)");
  EXPECT_EQ(rows[0].threads, "2");
  EXPECT_EQ(rows[0].cuda_visible, "3");
}

TEST(JobPlacement, ThetaGpuGivesEachRankOneGpuInOrder) {
  JobFixture f;
  const auto r = f.run("COBALT_NODEFILE=" + f.dir.file("nodes") +
                       " GPUS_PER_NODE=2 bash jobs/thetagpu.cobalt.sh configs/fashion_mnist.toml " +
                       f.options());
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  for (int rank : {0, 1}) {
    EXPECT_EQ(rows[rank].cuda_visible, std::to_string(rank)) << r.output;
    EXPECT_EQ(rows[rank].gpu, std::to_string(rank)) << r.output;
    EXPECT_EQ(rows[rank].local, std::to_string(rank) + "/2") << r.output;
  }
  expect_no_placement_problem(r.output);
}

// Open MPI's mpirun gives the ranks on nodes other than its own only the
// variables it names with -x (the stand-in starts every rank so): the
// settings of lockstep, NCCL, CUDA, OpenMP and UCX, the paths, and
// gpu_affinity.sh's, each where set; no others.
TEST(JobPlacement, ThetaGpuForwardsTheRanksSettingsWithDashX) {
  JobFixture f;
  const auto r =
      f.run("COBALT_NODEFILE=" + f.dir.file("nodes") +
            " GPUS_PER_NODE=2 NCCL_DEBUG=WARN NCCL_IB_HCA=mlx5_0 LOCKSTEP_VERIFY_BUCKETS=1"
            " OMP_NUM_THREADS=4 CUDA_DEVICE_ORDER=PCI_BUS_ID UCX_LOG_LEVEL=warn"
            " LD_LIBRARY_PATH=/nowhere/lib VIRTUAL_ENV=/nowhere NOT_FOR_RANKS=1"
            " bash jobs/thetagpu.cobalt.sh configs/fashion_mnist.toml " +
            f.options());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(mpirun \(stand-in\): -x ([^\n]*))")))
      << r.output;
  std::set<std::string> forwarded;
  std::istringstream names(m[1].str());
  for (std::string name; names >> name;) forwarded.insert(name);
  for (const char* name : {"PATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "GPUS_PER_NODE", "GPU_ORDER",
                           "NCCL_DEBUG", "NCCL_IB_HCA", "LOCKSTEP_VERIFY_BUCKETS",
                           "OMP_NUM_THREADS", "CUDA_DEVICE_ORDER", "UCX_LOG_LEVEL"}) {
    EXPECT_EQ(forwarded.count(name), 1u) << name << " is not forwarded\n" << r.output;
  }
  EXPECT_EQ(forwarded.count("NOT_FOR_RANKS"), 0u) << r.output;
  EXPECT_EQ(forwarded.count("CONDA_PREFIX"), 0u) << "unset, yet named\n" << r.output;
  EXPECT_FALSE(contains(r.output, "could not find environment variable")) << r.output;
  // They reach the ranks: each rank's doctor line has the NCCL settings, and
  // gpu_affinity.sh takes GPUS_PER_NODE.
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  EXPECT_EQ(rows[0].cuda_visible, "0") << r.output;
  EXPECT_EQ(rows[1].cuda_visible, "1") << r.output;
  size_t lines_with_nccl = 0;
  for (size_t at = r.output.find("NCCL_IB_HCA=mlx5_0"); at != std::string::npos;
       at = r.output.find("NCCL_IB_HCA=mlx5_0", at + 1)) {
    ++lines_with_nccl;
  }
  EXPECT_EQ(lines_with_nccl, 2u) << r.output;
}

TEST(JobPlacement, ThetaBindsDepthCpusAndRunsOnTheCpu) {
  JobFixture f;
  const auto r = f.run(
      "COBALT_JOBSIZE=1 PROC_PER_NODE=2 DEPTH=1 bash jobs/theta.cobalt.sh "
      "configs/fashion_mnist.toml " +
      f.options());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "no problems found")) << r.output;
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  EXPECT_EQ(rows[0].cpus, "0 (1)");
  EXPECT_EQ(rows[1].cpus, "1 (1)");
  for (int rank : {0, 1}) {
    EXPECT_EQ(rows[rank].threads, "1");
    EXPECT_EQ(rows[rank].gpu, "-");
    EXPECT_EQ(rows[rank].plugin, "not needed");
  }
}

// Ranks, threads and GPUs per node from the environment are whole numbers: a
// word would reach bash arithmetic as another variable's name (or 0).
TEST(JobPlacement, PerNodeCountsThatAreNotWholeNumbersStopTheJobNamingTheVariable) {
  JobFixture f;
  const std::string tail = " configs/fashion_mnist.toml " + f.options();
  const struct {
    const char* job;
    const char* message;
  } cases[] = {
      {"COBALT_JOBSIZE=1 PROC_PER_NODE=four bash jobs/theta.cobalt.sh",
       "theta.cobalt.sh: PROC_PER_NODE=four: must be a whole number of at least 1"},
      {"COBALT_JOBSIZE=1 DEPTH=0 bash jobs/theta.cobalt.sh",
       "theta.cobalt.sh: DEPTH=0: must be a whole number of at least 1"},
      {"COBALT_JOBSIZE=1 THREADS_PER_CORE=2x bash jobs/theta.cobalt.sh",
       "theta.cobalt.sh: THREADS_PER_CORE=2x: must be a whole number of at least 1"},
      {"PBS_NODEFILE=/dev/null RANKS_PER_NODE=-4 bash jobs/polaris.pbs.sh",
       "polaris.pbs.sh: RANKS_PER_NODE=-4: must be a whole number of at least 1"},
      {"COBALT_NODEFILE=/dev/null GPUS_PER_NODE=eight bash jobs/thetagpu.cobalt.sh",
       "thetagpu.cobalt.sh: GPUS_PER_NODE=eight: must be a whole number of at least 1"},
  };
  for (const auto& c : cases) {
    const auto r = f.run(std::string(c.job) + tail);
    EXPECT_EQ(r.exit_code, 1) << c.job << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.job << "\n" << r.output;
  }
}

// jobs/slurm.sbatch.sh, set for Perlmutter (4 ranks and 4 GPUs on a node of
// 64 cores: -c 32, NERSC's count). srun is given -c (Slurm >= 22.05 does not
// pass on --cpus-per-task) and --gpu-bind=none: every task sees its node's
// GPUs (Slurm's own binding fences each task's GPUs off by cgroups, which
// breaks CUDA IPC between them), and gpu_affinity.sh gives each rank one of
// them by SLURM_LOCALID, in reverse (GPU 3 is nearest to cores 0-15).
TEST(JobPlacement, SlurmBindsCoresAndGivesEachRankOneOfTheNodesGpus) {
  const std::string script = read_file(kSourceDir + "/jobs/slurm.sbatch.sh");
  for (const char* line : {"\n#SBATCH --ntasks-per-node=4\n", "\n#SBATCH --cpus-per-task=32\n",
                           "\n#SBATCH --gpus-per-node=4\n"}) {
    EXPECT_TRUE(contains(script, line)) << line;
  }
  EXPECT_FALSE(contains(script, "#SBATCH --gpus-per-task")) << script;
  JobFixture f;
  const std::string job = " bash jobs/slurm.sbatch.sh configs/fashion_mnist.toml " + f.options();
  // The node's GPUs, given by --gpus-per-node (the header) or by a
  // --gpus-per-task on the sbatch line: the same placement either way.
  for (const std::string gpus : {"SLURM_GPUS_PER_NODE=2", "SLURM_GPUS_PER_TASK=1"}) {
    const auto r = f.run("SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=1 " + gpus + job);
    EXPECT_TRUE(contains(r.output,
                         "srun (stand-in): -c 1 --cpu-bind=cores --gpu-bind=none "
                         "jobs/gpu_affinity.sh " LOCKSTEP_BINARY " doctor "))
        << gpus << "\n"
        << r.output;
    auto rows = rows_of(r.output);
    ASSERT_EQ(rows.size(), 2u) << gpus << "\n" << r.output;
    for (int rank : {0, 1}) {
      EXPECT_EQ(rows[rank].cpus, std::to_string(rank) + " (1)") << gpus << "\n" << r.output;
      EXPECT_EQ(rows[rank].threads, "1");
      EXPECT_EQ(rows[rank].gpus, "1") << gpus << "\n" << r.output;  // gpu_affinity.sh: one each
      EXPECT_EQ(rows[rank].cuda_visible, std::to_string(1 - rank)) << gpus << "\n" << r.output;
    }
    expect_no_placement_problem(r.output);
  }

  const auto r = f.run("SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=2 SLURM_GPUS_PER_NODE=1" + job);
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u) << r.output;
  EXPECT_EQ(rows[0].cpus, "0-1 (2)") << "srun needs -c since Slurm 22.05\n" << r.output;
  EXPECT_EQ(rows[0].threads, "2");
  EXPECT_EQ(rows[0].cuda_visible, "0");
  EXPECT_EQ(rows[0].gpu, "0");
}

// CPU nodes (DEVICE=cpu, no GPUs in the job): no GPU options, no wrapper.
TEST(JobPlacement, SlurmOnCpuNodesBindsCoresOnly) {
  JobFixture f;
  const auto r = f.run(
      "SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=2 DEVICE=cpu bash jobs/slurm.sbatch.sh "
      "configs/fashion_mnist.toml " +
      f.options());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(
      contains(r.output, "srun (stand-in): -c 2 --cpu-bind=cores " LOCKSTEP_BINARY " doctor "))
      << r.output;
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u) << r.output;
  EXPECT_EQ(rows[0].cpus, "0-1 (2)");
  EXPECT_EQ(rows[0].gpu, "-");
  EXPECT_EQ(rows[0].plugin, "not needed");
}

TEST(JobPlacement, SrunWithoutCpusPerTaskBindsOneCpu) {
  // The stand-in does what Slurm >= 22.05 does, so the test above can fail.
  JobFixture f;
  const auto r = f.run("SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=2 srun --cpu-bind=cores " LOCKSTEP_BINARY
                       " doctor " +
                       f.options());
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u) << r.output;
  EXPECT_EQ(rows[0].cpus, "0 (1)");
  EXPECT_EQ(rows[0].threads, "1");
}

TEST(JobPlacement, LocalSharesTheMachineBetweenItsRanks) {
  JobFixture f;
  const auto r =
      run_command("cd " + kSourceDir +
                  " && LOCKSTEP=" LOCKSTEP_BINARY
                  " DOCTOR=1 timeout 120 bash jobs/local.sh 2 configs/fashion_mnist.toml " +
                  f.options());
  auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  for (int rank : {0, 1}) {
    EXPECT_EQ(rows[rank].cuda_visible, "unset");
    EXPECT_EQ(rows[rank].threads, std::to_string(std::max(1, app::affinity_count().cores / 2)));
  }
  expect_no_placement_problem(r.output);
}

}  // namespace
}  // namespace lockstep
